# -*- coding: utf-8 -*-
# Copyright: sparkops maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
#
# PRIVATE to the sparkops.specdec collection: secrets hygiene shared by the modules (on the nodes)
# and the controller-side plugins. Not a public API; names and messages may change in any release
# without notice. Do not import it from other collections. Standard library only (runs on nodes).
"""Secrets: scrub them from messages, reject malformed tokens, refuse secret-looking env names.

* ``scrub(text, secrets)``: ``text`` with every form of every secret replaced by ``********``:
  the raw value, its stripped value and whitespace-separated pieces, repr/JSON escaped (``\\n``),
  URL-encoded (upper and lower case hex, ``+`` for spaces), base64 and URL-safe base64 of the
  value and of ``user:value`` (HTTP Basic; any user name), and ``Bearer <value>``. Also any
  ``Bearer <word>`` / ``Basic <base64>`` credential, whatever the secret. Every message built from
  a library exception goes through it before it is shown or written.
* ``token_defects(token)``: what is wrong with a token's shape (white space around it, a line
  break or space inside, a ``Bearer`` prefix, quotes around it, non-printable or non-ASCII
  characters), never the value.
* ``secret_env_name(name)``: the pattern that makes an environment variable name look secret
  (``HF_TOKEN`` -> ``TOKEN``), or None (``NCCL_IB_HCA``, ``MAX_NUM_TOKENS``).
* ``hf_token_env(token, rank_env)``: the ``docker exec`` environment that carries the token to
  the ranks: empty when the ranks run offline (``HF_HUB_OFFLINE=1``), which need no token.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import json
import re

try:
    from urllib.parse import quote, quote_plus
except ImportError:  # pragma: no cover - Python 2
    from urllib import quote, quote_plus

MASK = '********'
# Pieces shorter than this are not scrubbed on their own (they would mask ordinary words);
# the whole secret is always scrubbed, whatever its length.
MIN_PIECE = 6
# Base64 cores shorter than this are not scrubbed (random matches in ordinary text).
MIN_B64_CORE = 8

_B64_CHARS = 'A-Za-z0-9+/'
_B64URL_CHARS = 'A-Za-z0-9_-'
# Credentials in an Authorization header, whatever the secret (a header dump, a repr of headers).
_GENERIC = (
    re.compile(r'(?i)(\bbearer\s+)[^\s\'",;)}\]]+'),
    re.compile(r'(?i)(\bbasic\s+)[A-Za-z0-9+/_-]{8,}={0,2}'),
)


def _escaped_forms(value):
    return {
        value,
        repr(value)[1:-1],
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        repr(repr(value)[1:-1])[1:-1],  # escaped twice (a repr of a repr)
    }


def _url_forms(value):
    forms = set()
    for encoded in (quote(value, safe=''), quote(value), quote_plus(value)):
        forms.add(encoded)
        forms.add(re.sub(r'%[0-9A-F]{2}', lambda m: m.group(0).lower(), encoded))
    return forms


def _b64_cores(data):
    """Substrings of base64(prefix + data + suffix) fixed by data alone, for any prefix and suffix.

    For each alignment of data in the 3-byte groups (prefix length modulo 3): the characters that
    encode only bytes of data (the first group's characters mixing prefix bits are dropped, as is
    the last partial group), for the standard and the URL-safe alphabet.
    """
    cores = []
    for offset in (0, 1, 2):
        encoded = base64.b64encode(b'\0' * offset + data).decode('ascii')
        skip = {0: 0, 1: 2, 2: 3}[offset]
        full_groups = (offset + len(data)) // 3
        core = encoded[skip:full_groups * 4]
        if len(core) >= MIN_B64_CORE:
            cores.append(core)
            cores.append(core.replace('+', '-').replace('/', '_'))
    return cores


def secret_forms(secret):
    """(plain forms, base64 cores) of one secret; see the module docstring."""
    if not secret:
        return set(), set()
    secret = str(secret)
    values = {secret}
    if secret.strip():
        values.add(secret.strip())
    for piece in re.split(r'\s+', secret):
        if len(piece) >= MIN_PIECE:
            values.add(piece)
    plain = set()
    for value in values:
        plain |= _escaped_forms(value)
        plain |= _url_forms(value)
    plain.discard('')
    cores = set()
    for value in values:
        try:
            data = value.encode('utf-8')
        except UnicodeError:  # pragma: no cover - lone surrogates
            continue
        cores.update(_b64_cores(data))
    return plain, cores


class Scrubber(object):
    """A compiled scrub for a set of secrets (build once, use for every message)."""

    def __init__(self, secrets):
        plain, cores = set(), set()
        for secret in secrets or ():
            p, c = secret_forms(secret)
            plain |= p
            cores |= c
        parts = []
        for core in sorted(cores, key=len, reverse=True):
            # The whole base64 run around the core (user:token encodes the user name too).
            chars = _B64URL_CHARS if ('-' in core or '_' in core) else _B64_CHARS
            parts.append('[%s]*%s[%s]*=*' % (chars, re.escape(core), chars))
        parts.extend(re.escape(p) for p in sorted(plain, key=len, reverse=True))
        self._regex = re.compile('|'.join(parts)) if parts else None

    def __call__(self, text):
        text = '' if text is None else str(text)
        if self._regex is not None:
            text = self._regex.sub(MASK, text)
        for generic in _GENERIC:
            text = generic.sub(lambda m: m.group(1) + MASK, text)
        return text


def scrub(text, secrets):
    """text with every form of every secret (and any Bearer/Basic credential) replaced by ********."""
    return Scrubber(secrets)(text)


# ---------------------------------------------------------------------------------------------
# Token shape
# ---------------------------------------------------------------------------------------------

def token_defects(token):
    """What is wrong with the shape of an access token, as short phrases; [] when nothing is.

    Never returns (part of) the value. An empty token is no defect (it means "no token").
    """
    if not token:
        return []
    token = str(token)
    defects = []
    if token != token.strip():
        ends = []
        if token[:1].isspace():
            ends.append('leading')
        if token[-1:].isspace():
            ends.append('trailing')
        newline = ' (a line break from a file, a YAML | block or echo?)' if re.search(r'[\r\n]\s*$|^\s*[\r\n]', token) \
            else ''
        defects.append('has %s white space%s' % (' and '.join(ends), newline))
    inner = token.strip()
    if re.search(r'[\r\n]', inner):
        defects.append('contains a line break')
    elif re.search(r'[ \t]', inner):
        defects.append('contains a space or tab')
    if re.match(r'(?i)bearer(\s|$)', inner):
        defects.append('starts with "Bearer " (give the token alone: the HTTP header adds "Bearer")')
    if len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in '"\'':
        defects.append('is wrapped in quotes')
    if any((ord(c) < 32 and c not in '\r\n\t ') or ord(c) == 127 for c in token):
        defects.append('contains non-printable (control) characters')
    if any(ord(c) > 126 for c in token):
        defects.append('contains non-ASCII characters (copied from a rich-text page?)')
    return defects


# ---------------------------------------------------------------------------------------------
# Environment variable names
# ---------------------------------------------------------------------------------------------

# Whole names known to be safe although a word looks secret.
SAFE_ENV_NAMES = frozenset((
    'TOKENIZERS_PARALLELISM',           # huggingface tokenizers: a boolean
    'HF_HUB_DISABLE_IMPLICIT_TOKEN',    # huggingface_hub: a boolean
    'TIKTOKEN_ENCODINGS_BASE',          # gpt-oss tokenizer files: a directory
    'TIKTOKEN_RS_CACHE_DIR',
))
# Prefixes of tools whose variables are configuration, never credentials.
SAFE_ENV_PREFIXES = ('NCCL_', 'UCX_', 'OMPI_', 'OMPI_MCA_', 'PMIX_', 'CUDA_', 'NVIDIA_', 'TORCH_NCCL_', 'GLOO_')
# Words (a name split at "_") that make a name secret, and the pattern reported for them.
_SECRET_WORDS = {
    'TOKEN': 'TOKEN', 'SECRET': 'SECRET', 'SECRETS': 'SECRET', 'PASSWORD': 'PASSWORD', 'PASSWD': 'PASSWORD',
    'PASSPHRASE': 'PASSWORD', 'CREDENTIAL': 'CREDENTIAL', 'CREDENTIALS': 'CREDENTIAL',
    'APIKEY': 'API_KEY', 'COOKIE': 'COOKIE',
}
# Two-word patterns (adjacent words).
_SECRET_PAIRS = {
    ('API', 'KEY'): 'API_KEY', ('PRIVATE', 'KEY'): 'PRIVATE_KEY', ('ACCESS', 'KEY'): 'ACCESS_KEY',
    ('SECRET', 'KEY'): 'SECRET', ('AUTH', 'KEY'): 'AUTH_KEY', ('SIGNING', 'KEY'): 'SIGNING_KEY',
    ('ENCRYPTION', 'KEY'): 'ENCRYPTION_KEY', ('SSH', 'KEY'): 'SSH_KEY',
}
# Substrings inside one word (HFTOKEN, MYSECRET, DBPASSWORD) and the words that contain them safely.
_SECRET_STEMS = {'TOKEN': 'TOKEN', 'SECRET': 'SECRET', 'PASSWORD': 'PASSWORD', 'PASSWD': 'PASSWORD',
                 'CREDENTIAL': 'CREDENTIAL', 'APIKEY': 'API_KEY'}
_SAFE_WORDS = frozenset((
    'TOKENS', 'TOKENIZER', 'TOKENIZERS', 'TOKENIZE', 'TOKENIZED', 'TOKENIZATION', 'DETOKENIZE', 'DETOKENIZER',
    'DETOKENIZATION', 'TIKTOKEN', 'PRETOKENIZED',
))
# A TOKEN word next to one of these is a count, a limit or an id (MAX_TOKEN_LEN, BOS_TOKEN_ID).
_COUNT_WORDS = frozenset((
    'MAX', 'MIN', 'NUM', 'N', 'LEN', 'LENGTH', 'LIMIT', 'LIMITS', 'COUNT', 'SIZE', 'BUDGET', 'PER', 'RATE', 'ID',
    'IDS', 'TYPE', 'BOS', 'EOS', 'PAD', 'UNK', 'SEP', 'CLS', 'MASK', 'SPECIAL',
))


def secret_env_name(name):
    """The pattern that makes an environment variable name look secret (e.g. TOKEN), or None."""
    upper = str(name).upper()
    if upper in SAFE_ENV_NAMES or upper.startswith(SAFE_ENV_PREFIXES):
        return None
    words = [w for w in upper.split('_') if w]
    for first, second in zip(words, words[1:]):
        if (first, second) in _SECRET_PAIRS:
            return _SECRET_PAIRS[(first, second)]
    for word in words:
        pattern = _SECRET_WORDS.get(word)
        if word == 'TOKEN' and any(w in _COUNT_WORDS for w in words):
            continue
        if pattern:
            return pattern
        if word in _SAFE_WORDS:
            continue
        for stem, stem_pattern in _SECRET_STEMS.items():
            if stem in word:
                return stem_pattern
    return None


# ---------------------------------------------------------------------------------------------
# The token for the server ranks
# ---------------------------------------------------------------------------------------------

def hf_token_env(token, rank_env=None):
    """The exec environment for the server start: {'HF_TOKEN': token}, or {} when there is no
    token or the ranks run offline (rank_env has HF_HUB_OFFLINE=1), so the token never reaches a
    process that cannot use it."""
    if not token:
        return {}
    offline = str((rank_env or {}).get('HF_HUB_OFFLINE', '')).strip().lower()
    if offline in ('1', 'true', 'yes', 'on'):
        return {}
    return {'HF_TOKEN': token}
