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
* ``labelled_forms(secret)``: the same forms as ``secret_forms``, grouped by kind: ``raw``, ``escaped``
  (repr/JSON), ``url`` (URL-encoded), ``base64`` (cores, also inside ``user:secret``) and ``bearer``.
* ``Finder(secrets)``: which kinds of form of the secrets a text, a file or a tree holds, and where
  (``find``, ``scan_file``, ``scan_tree``); reports paths, offsets and kinds, never the value.
* ``Redactor(secrets)``: ``scrub`` plus what needs no secret: values of secret-looking names (mapping
  keys, ``NAME=value`` strings, ``key: value`` / ``KEY=value`` lines) and the password of
  ``scheme://user:password@`` URLs; ``data()`` for JSON-like structures, ``text()`` for files.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import fnmatch
import glob
import json
import os
import re
import stat

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


# The kinds of form, most literal first (a string that is several kinds is reported as the first).
FORM_KINDS = ('raw', 'escaped', 'url', 'base64', 'bearer')


def labelled_forms(secret):
    """kind -> set of strings, for one secret: every form ``secret_forms`` scrubs, by kind (FORM_KINDS).

    ``raw``: the value, its stripped value and its pieces of MIN_PIECE+ characters; ``escaped``: their
    repr/JSON escapes that differ from them; ``url``: their URL encodings that differ; ``base64``: the
    base64 cores (standard and URL-safe, any alignment, so also inside ``base64(user:secret)``);
    ``bearer``: ``Bearer <stripped value>``. A kind with no form of its own is an empty set.
    """
    forms = dict((kind, set()) for kind in FORM_KINDS)
    if not secret:
        return forms
    secret = str(secret)
    values = {secret}
    if secret.strip():
        values.add(secret.strip())
    for piece in re.split(r'\s+', secret):
        if len(piece) >= MIN_PIECE:
            values.add(piece)
    values.discard('')
    forms['raw'] = set(values)
    for value in values:
        forms['escaped'] |= _escaped_forms(value)
        forms['url'] |= _url_forms(value)
        try:
            data = value.encode('utf-8')
        except UnicodeError:  # pragma: no cover - lone surrogates
            continue
        forms['base64'].update(_b64_cores(data))
    if secret.strip():
        forms['bearer'] = {'Bearer ' + secret.strip()}
    seen = set()
    for kind in FORM_KINDS:
        forms[kind] -= seen
        forms[kind].discard('')
        seen |= forms[kind]
    return forms


def secret_forms(secret):
    """(plain forms, base64 cores) of one secret; see the module docstring."""
    forms = labelled_forms(secret)
    return forms['raw'] | forms['escaped'] | forms['url'], set(forms['base64'])


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


# ---------------------------------------------------------------------------------------------
# Finding a secret: in a text, a file, a tree (leak tests and audits)
# ---------------------------------------------------------------------------------------------

# Bytes read per step when a file is searched (a form cut at a step's end is found in the next one).
SCAN_CHUNK = 4 * 1024 * 1024


class Finder(object):
    """Which kinds of form (FORM_KINDS) of some secrets a text, file or tree holds.

    Every form is a literal (``bytes.find``), searched in the UTF-8 bytes, so that a tree of
    several GB is searched at disk speed. Results name the kind, the place and the offset of the
    first match, never the value.
    """

    def __init__(self, secrets):
        by_form = {}
        for secret in secrets or ():
            for kind, forms in labelled_forms(secret).items():
                for form in forms:
                    data = form.encode('utf-8', 'surrogatepass')
                    # The most literal kind wins when two secrets' forms coincide.
                    if data not in by_form or FORM_KINDS.index(kind) < FORM_KINDS.index(by_form[data]):
                        by_form[data] = kind
        # Longest first: a long form is checked before the short pieces it contains.
        self.forms = sorted(by_form.items(), key=lambda item: (-len(item[0]), item[1]))
        self.overlap = max([len(f) for f, _kind in self.forms] or [1]) - 1

    def __bool__(self):
        return bool(self.forms)

    __nonzero__ = __bool__  # pragma: no cover - Python 2

    def find(self, data, base=0):
        """kind -> offset of its first match in data (text or bytes); {} when nothing matches."""
        if not isinstance(data, bytes):
            data = ('' if data is None else str(data)).encode('utf-8', 'surrogatepass')
        found = {}
        for form, kind in self.forms:
            at = data.find(form)
            if at >= 0 and (kind not in found or base + at < found[kind]):
                found[kind] = base + at
        return found

    def kinds(self, data):
        """The kinds of form in data, in FORM_KINDS order."""
        found = self.find(data)
        return [kind for kind in FORM_KINDS if kind in found]

    def scan_file(self, path, chunk=SCAN_CHUNK):
        """kind -> offset in the file at path (a regular file, read in chunks); OSError is raised."""
        found = {}
        chunk = max(int(chunk), self.overlap + 1)
        with open(path, 'rb') as handle:
            offset = 0
            tail = b''
            while True:
                block = handle.read(chunk)
                if not block:
                    break
                data = tail + block
                for kind, at in self.find(data, offset - len(tail)).items():
                    if kind not in found or at < found[kind]:
                        found[kind] = at
                offset += len(block)
                tail = data[-self.overlap:] if self.overlap else b''
        return found

    def scan_tree(self, roots, exclude=(), globs=(), chunk=SCAN_CHUNK):
        """Search every regular file under roots (symbolic links not followed, other file systems
        included) and every file matching globs (e.g. /proc/[0-9]*/environ, read whatever their
        st_size says), skipping the paths under exclude (an exclude never hides an explicit root or
        a file matching globs).

        Returns {"found": [{"path", "kinds", "offsets"}], "files": N, "bytes": N, "unreadable": N,
        "unreadable_sample": [up to 20 paths]}, found sorted by path.
        """
        exclude = [os.path.normpath(p) for p in exclude or ()]
        result = {'found': [], 'files': 0, 'bytes': 0, 'unreadable': 0, 'unreadable_sample': []}
        seen = set()

        def under(path, prefix):
            return path == prefix or path.startswith(prefix.rstrip('/') + '/') or fnmatch.fnmatch(path, prefix)

        def excluded(path, active=None):
            return any(under(path, p) for p in (exclude if active is None else active))

        def search(path):
            if path in seen:
                return
            seen.add(path)
            try:
                found = self.scan_file(path, chunk)
                size = os.lstat(path).st_size
            except (IOError, OSError):
                result['unreadable'] += 1
                if len(result['unreadable_sample']) < 20:
                    result['unreadable_sample'].append(path)
                return
            result['files'] += 1
            result['bytes'] += size
            if found:
                kinds = [k for k in FORM_KINDS if k in found]
                result['found'].append({'path': path, 'kinds': kinds, 'offsets': dict((k, found[k]) for k in kinds)})

        def regular(path):
            try:
                return stat.S_ISREG(os.lstat(path).st_mode)
            except OSError:
                return False

        for root in roots or ():
            root = os.path.normpath(root)
            if regular(root):
                search(root)
                continue
            # Excludes that hold the root itself do not apply under it (an explicit root is always searched).
            active = [p for p in exclude if not under(root, p)]
            for top, dirs, files in os.walk(root, onerror=lambda err: None):
                dirs[:] = sorted(d for d in dirs if not excluded(os.path.join(top, d), active))
                for name in sorted(files):
                    path = os.path.join(top, name)
                    if not excluded(path, active) and regular(path):
                        search(path)
        for pattern in globs or ():  # explicit too: exclude does not apply (/proc excluded, its environ files read)
            for path in sorted(glob.glob(pattern)):
                if os.path.isfile(path):
                    search(path)  # /proc files: regular, size 0, read anyway
        result['found'].sort(key=lambda entry: entry['path'])
        return result


# ---------------------------------------------------------------------------------------------
# Redaction of collected data (support bundle)
# ---------------------------------------------------------------------------------------------

# scheme://user:password@host -> the password masked (proxy and registry URLs in docker info).
_URL_CREDENTIALS = re.compile(r'(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]*:)[^/\s@]+@')
# NAME=value (an environment entry, a command-line assignment).
_ASSIGNMENT = re.compile(r'^([A-Za-z_][A-Za-z0-9_]*)=(.*)$', re.S)
# key: value / key = value / export KEY=value lines of a text file (YAML, INI, shell, env files).
_KEY_LINE = re.compile(r'(?m)^(\s*(?:-\s+)?(?:export\s+)?["\']?)([A-Za-z_][A-Za-z0-9_.-]*)(["\']?\s*[:=][ \t]*)(\S[^\r\n]*)$')


def _secret_key(name):
    return secret_env_name(re.sub(r'[.-]', '_', str(name)))


class Redactor(object):
    """Redact collected data: every form of the secrets (Scrubber) and what needs no secret to be known."""

    def __init__(self, secrets):
        self.scrub = Scrubber(secrets)

    def _urls(self, text):
        return _URL_CREDENTIALS.sub(lambda m: m.group(1) + MASK + '@', text)

    def text(self, text):
        """A file's or a command's text: secret-valued key lines masked, URL passwords, then every form."""
        text = '' if text is None else str(text)

        def key_line(match):
            if _secret_key(match.group(2)) and match.group(4).strip() not in ('', '""', "''", MASK, '{}', '[]', 'null', '~'):
                return match.group(1) + match.group(2) + match.group(3) + MASK
            return match.group(0)

        return self.scrub(self._urls(_KEY_LINE.sub(key_line, text)))

    def string(self, value):
        """One string of a structure: a NAME=value whose name looks secret keeps only its name."""
        match = _ASSIGNMENT.match(value)
        if match and _secret_key(match.group(1)) and match.group(2):
            return match.group(1) + '=' + MASK
        return self.scrub(self._urls(value))

    def data(self, value, key=None):
        """A JSON-like structure with the values of secret-looking keys and NAME=value strings masked and
        every string scrubbed; keys are scrubbed too. Numbers, booleans and None are kept."""
        if isinstance(value, dict):
            return dict((self.scrub(k) if isinstance(k, str) else k, self.data(v, k)) for k, v in value.items())
        if isinstance(value, (list, tuple)):
            return [self.data(v) for v in value]
        if isinstance(value, bytes):
            value = value.decode('utf-8', 'replace')
        if isinstance(value, str):
            if key is not None and isinstance(key, str) and _secret_key(key) and value:
                return MASK
            return self.string(value)
        return value
