"""Generate every role's defaults and option tables from its meta/argument_specs.yml.

``meta/argument_specs.yml`` is the one hand-written source of a role's options (type, choices, default,
description). From it this script writes (``make docs``):

- ``roles/<role>/defaults/main/options.yml``: every option with its spec default (null when the spec declares
  none), except the options of the hand-kept ``defaults/main/computed.yml`` (the Jinja defaults: a spec default is
  never templated);
- the option table of ``roles/<role>/README.md``, between ``<!-- BEGIN generated options -->`` and
  ``<!-- END generated options -->``;
- ``docs/settings.md``: every role's options.

``--check`` writes nothing and exits 1 naming each stale file (``make docs-check``, part of ``make lint``).
Needs PyYAML only.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

import yaml

HEADER = '# generated from meta/argument_specs.yml by make docs; edit the spec\n'
BEGIN = '<!-- BEGIN generated options (make docs; edit meta/argument_specs.yml) -->'
END = '<!-- END generated options -->'
# The justified var-naming[no-role-prefix] exceptions (.ansible-lint says where they are): an option of specdec_common
# is a fact shared by every role; an option of another role without its prefix kept the name it had in specdec_server
# when its tasks moved into that role (issue 21: options keep their names).
NOQA_SHARED = '  # noqa: var-naming[no-role-prefix]  A fact shared by every role: one name for all of them.'
NOQA_MOVED = '  # noqa: var-naming[no-role-prefix]  Kept its specdec_server name.'
DOCS = os.path.join('docs', 'settings.md')
_MARKUP = re.compile(r'\b([A-Z])\(')


class _Dumper(yaml.SafeDumper):
    """Block style with indented sequences (the layout of the rest of the collection)."""

    def increase_indent(self, flow=False, indentless=False):
        return super().increase_indent(flow, False)


def load_specs(root):
    """Role name -> (options of its main entry point in spec order), for each role with options."""
    roles = {}
    base = os.path.join(root, 'roles')
    for role in sorted(os.listdir(base)):
        path = os.path.join(base, role, 'meta', 'argument_specs.yml')
        if not os.path.isfile(path):
            continue
        with open(path, encoding='utf-8') as f:
            doc = yaml.safe_load(f) or {}
        options = (((doc.get('argument_specs') or {}).get('main') or {}).get('options')) or {}
        if options:
            roles[role] = options
    return roles


def computed_path(root, role):
    return os.path.join(root, 'roles', role, 'defaults', 'main', 'computed.yml')


def load_computed(root, role):
    """The hand-kept Jinja defaults of a role ({} when it has none)."""
    path = computed_path(root, role)
    if not os.path.isfile(path):
        return {}
    with open(path, encoding='utf-8') as f:
        return yaml.safe_load(f) or {}


def check_computed(role, options, computed):
    """Problems of computed.yml: only declared options, and none that also declares a spec default."""
    problems = []
    for name in computed:
        if name not in options:
            problems.append('%s: defaults/main/computed.yml sets %s, which meta/argument_specs.yml does not declare'
                            % (role, name))
        elif 'default' in options[name]:
            problems.append('%s: %s has a spec default and a computed one; keep one (a Jinja default: computed.yml only)'
                            % (role, name))
    return problems


def render_defaults(role, options, computed):
    out = ['---\n', HEADER]
    if computed:
        out.append('# Kept by hand in computed.yml (Jinja defaults): %s\n' % ', '.join(sorted(computed)))
    for name, spec in options.items():
        if name in computed:
            continue
        text = yaml.dump({name: spec.get('default')}, Dumper=_Dumper, default_flow_style=False, sort_keys=False,
                         width=1000, allow_unicode=True)
        if not name.startswith(role + '_'):
            first, rest = text.split('\n', 1)
            text = first + (NOQA_SHARED if role == 'specdec_common' else NOQA_MOVED) + '\n' + rest
        out.append(text)
    return ''.join(out)


def _markup(text):
    """Ansible doc markup (C(), O(), V(), M(), I(), B(), U(), L(), E(), P()) -> Markdown; parentheses may nest."""
    out, pos = [], 0
    for match in _MARKUP.finditer(text):
        if match.start() < pos or match.group(1) not in 'COVMIBULEP':
            continue
        depth, end = 1, match.end()
        while end < len(text) and depth:
            depth += {'(': 1, ')': -1}.get(text[end], 0)
            end += 1
        if depth:
            continue
        inner = text[match.end():end - 1]
        kind = match.group(1)
        if kind == 'I':
            rendered = '*%s*' % inner
        elif kind == 'B':
            rendered = '**%s**' % inner
        elif kind == 'U':
            rendered = inner
        elif kind == 'O' and '#' in inner:
            # O(fqcn#role:entrypoint:option), another role's option: its name (markup of the Ansible docs).
            rendered = '`%s`' % inner.rsplit(':', 1)[-1].split('=', 1)[0]
        elif kind == 'L':
            label, url = inner.rsplit(',', 1) if ',' in inner else (inner, inner)
            rendered = '[%s](%s)' % (label.strip(), url.strip())
        else:
            rendered = '`%s`' % inner
        out.append(text[pos:match.start()])
        out.append(rendered)
        pos = end
    out.append(text[pos:])
    return ''.join(out)


def _cell(text):
    return text.replace('|', '\\|').replace('\n', ' ')


def _description(spec):
    desc = spec.get('description') or ''
    if isinstance(desc, list):
        desc = ' '.join(str(item).strip() for item in desc)
    return _markup(' '.join(str(desc).split()))


def _value(value):
    if isinstance(value, str) and value == '':
        return '`""`'
    text = yaml.safe_dump(value, default_flow_style=True, width=10000, allow_unicode=True).strip()
    if text.endswith('\n...'):
        text = text[:-4].strip()
    elif text.endswith('...'):
        text = text[:-3].strip()
    return '`%s`' % text


def _type(spec):
    kind = spec.get('type', 'str')
    if spec.get('elements'):
        kind = '%s of %s' % (kind, spec['elements'])
    return kind


def _default(name, spec, computed):
    if name in computed:
        return _value(computed[name])
    return _value(spec.get('default'))


def _choices(spec):
    return ', '.join(_value(c) for c in spec.get('choices') or [])


def render_table(options, computed):
    rows = ['| variable | type | default | meaning |', '|---|---|---|---|']
    for name, spec in options.items():
        meaning = _description(spec)
        if spec.get('choices'):
            meaning += ' Choices: %s.' % _choices(spec)
        rows.append('| `%s` | %s | %s | %s |' % (name, _type(spec), _cell(_default(name, spec, computed)), _cell(meaning)))
    return '\n'.join(rows) + '\n'


def render_readme(path, text, table):
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise ValueError('%s: needs one %s line and one %s line after it, around the option table' % (path, BEGIN, END))
    head = text.split(BEGIN, 1)[0]
    tail = text.split(END, 1)[1]
    return '%s%s\n\n%s\n%s%s' % (head, BEGIN, table, END, tail)


def render_settings(roles, computeds):
    out = ['# Settings reference\n\n',
           '<!-- generated from roles/*/meta/argument_specs.yml by make docs; edit the specs -->\n\n',
           'Every option of every role, as its `meta/argument_specs.yml` declares it (validated when the role starts). '
           'Defaults in backticks are YAML; `null` means the option is unset unless the description says what fills '
           'it (a preset, the inventory); a default in `{{ }}` is a Jinja expression evaluated on the host. '
           'Durations and sizes are in the units their description names.\n\n',
           'Every string option (a path, a name, a text, and each string of a list) takes no control character (a '
           'line break, a tab, ESC) and no invisible format character (a zero-width space, a bidi mark: Unicode '
           'category Cf); a path (an option whose name ends in _path, _dir, _file, _venv, _archive or _device) is at '
           'most 4095 bytes in UTF-8, each component at most 255 (Linux PATH_MAX and NAME_MAX), any other string at '
           'most 4096 characters. `specdec_server_smoke_prompt` and `specdec_benchmark_note` may hold line breaks and '
           'tabs. Refused by the preflight before any host is contacted (plugins/plugin_utils/_text.py).\n\n']
    for role in roles:
        out.append('- [%s](#%s) (%d options)\n' % (role, role, len(roles[role])))
    for role, options in roles.items():
        computed = computeds[role]
        out.append('\n## %s\n\n' % role)
        out.append('Role `sparkops.specdec.%s` ([README](../roles/%s/README.md)).\n\n' % (role, role))
        out.append('| option | type | default | choices | description |\n|---|---|---|---|---|\n')
        for name, spec in options.items():
            out.append('| `%s` | %s | %s | %s | %s |\n' % (
                name, _type(spec), _cell(_default(name, spec, computed)), _cell(_choices(spec)),
                _cell(_description(spec))))
    return ''.join(out)


def outputs(root):
    """Path (relative to root) -> the text it must hold."""
    roles = load_specs(root)
    computeds = {role: load_computed(root, role) for role in roles}
    problems = [p for role in roles for p in check_computed(role, roles[role], computeds[role])]
    if problems:
        raise ValueError('\n'.join(problems))
    files = {}
    for role, options in roles.items():
        files[os.path.join('roles', role, 'defaults', 'main', 'options.yml')] = render_defaults(
            role, options, computeds[role])
        readme = os.path.join('roles', role, 'README.md')
        with open(os.path.join(root, readme), encoding='utf-8') as f:
            files[readme] = render_readme(readme, f.read(), render_table(options, computeds[role]))
    files[DOCS] = render_settings(roles, computeds)
    return files


def stale(root):
    """Paths whose content differs from what make docs would write."""
    found = []
    for path, text in sorted(outputs(root).items()):
        full = os.path.join(root, path)
        current = None
        if os.path.isfile(full):
            with open(full, encoding='utf-8') as f:
                current = f.read()
        if current != text:
            found.append(path)
    return found


def write(root):
    written = []
    for path, text in sorted(outputs(root).items()):
        full = os.path.join(root, path)
        if os.path.isfile(full):
            with open(full, encoding='utf-8') as f:
                if f.read() == text:
                    continue
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, 'w', encoding='utf-8') as f:
            f.write(text)
        written.append(path)
    return written


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
    parser.add_argument('--check', action='store_true', help='write nothing; exit 1 when a generated file is stale')
    parser.add_argument('--root', default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = parser.parse_args(argv)
    try:
        if args.check:
            found = stale(args.root)
            for path in found:
                print('%s: stale (generated from meta/argument_specs.yml); run make docs' % path, file=sys.stderr)
            return 1 if found else 0
        for path in write(args.root):
            print('wrote %s' % path)
    except (ValueError, OSError, yaml.YAMLError) as exc:
        print('make docs: %s' % exc, file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
