#!/usr/bin/env python3
"""The include graph of the library (pmpi/, cuda/, core/) runs one way: fails (rc 1, one
line per finding) on an include between two layers that docs/design.md's `layers` block
does not allow, on an include cycle among files, on a source file in no layer, on a quoted
include that names no file of the tree, and on a cycle in the block itself.

Only quoted includes count (`#include "x"`); system headers are not the tree's. A quoted
include resolves, first match wins, against the including file's folder, then pmpi/, then
core/, then cuda/ (pmpi headers are written with their wing, `#include "base/errors.hpp"`,
core and cuda headers by bare name). A file's layer is the longest layer of the block that
is a folder prefix of its path; a layer written `DIR/*` holds only the files directly in
DIR (pmpi/* is the public header, tempi.h). Includes within one layer are always allowed
(the cycle check covers them); the block lists, per layer, every other layer its files may
include: nothing is implied, the block says it all.

    python3 tests/layout/check_includes.py [SOURCE_ROOT]   # default: this checkout
    python3 tests/layout/check_includes.py --self-test
"""
import os
import re
import sys

from library_files import source_files
import tempfile

SEARCH_DIRS = ('pmpi', 'core', 'cuda')  # after the including file's own folder
EXTENSIONS = ('.cpp', '.hpp', '.cu', '.cuh', '.h', '.def')
DESIGN = os.path.join('docs', 'design.md')
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"', re.M)
BLOCK = re.compile(r'^```layers[ \t]*\n(.*?)^```', re.M | re.S)


class LayoutError(Exception):
    """The layers block cannot be read: nothing else can be checked."""


def blank_comments(text):
    """The text with every comment replaced by spaces (newlines kept, so line numbers
    stay); string and character literals are kept, and a // inside one is not a comment."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i))
            i = j
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c and text[j] != '\n':
                j += 2 if text[j] == '\\' else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def includes_of(text):
    """[(line, target)] for each quoted include outside comments."""
    clean = blank_comments(text)
    return [(clean.count('\n', 0, m.start()) + 1, m.group(1)) for m in INCLUDE.finditer(clean)]


def resolve(root, including, target):
    """The tree path (with /) that a quoted include names, or None."""
    for folder in (os.path.dirname(including),) + SEARCH_DIRS:
        path = os.path.normpath(os.path.join(folder, target)).replace(os.sep, '/')
        if not path.startswith('../') and os.path.isfile(os.path.join(root, path)):
            return path
    return None


def parse_layers(design_text):
    """{layer: set of layers it may include} from the fenced block tagged `layers`.
    A line is `LAYER -> LAYER...`; `#` starts a comment."""
    m = BLOCK.search(design_text)
    if not m:
        raise LayoutError('%s: no fenced block tagged `layers`' % DESIGN)
    start = design_text.count('\n', 0, m.start(1)) + 1
    deps = {}
    for k, line in enumerate(m.group(1).split('\n')):
        line = line.split('#', 1)[0].strip()
        if not line:
            continue
        left, arrow, right = line.partition('->')
        name = left.strip()
        if not arrow or not name or len(name.split()) != 1:
            raise LayoutError('%s:%d: not `LAYER -> LAYER...`: %s' % (DESIGN, start + k, line))
        if name in deps:
            raise LayoutError('%s:%d: layer %s written twice' % (DESIGN, start + k, name))
        deps[name] = set(right.split())
    for name, targets in deps.items():
        for t in sorted(targets - set(deps)):
            raise LayoutError('%s: layer %s may include %s, which the block does not define' % (DESIGN, name, t))
    return deps


def layer_of(path, layers):
    """The layer of a tree path: the longest folder prefix among the layers, or None."""
    best, best_len = None, -1
    folder = os.path.dirname(path)
    for layer in layers:
        if layer.endswith('/*'):
            hit = folder == layer[:-2]
        else:
            hit = path.startswith(layer + '/')
        length = len(layer[:-2] if layer.endswith('/*') else layer)
        if hit and length > best_len:
            best, best_len = layer, length
    return best


def find_cycle(graph, nodes):
    """A cycle through the strongly connected set `nodes` of `graph`, as a node list
    starting and ending at the same node (breadth first, so it is a shortest one)."""
    start = min(nodes)
    parent, queue = {start: None}, [start]
    for node in queue:
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                path = [node]
                while parent[path[-1]] is not None:
                    path.append(parent[path[-1]])
                return path[::-1] + [start]
            if nxt in nodes and nxt not in parent:
                parent[nxt] = node
                queue.append(nxt)
    return [start, start]


def strongly_connected(graph):
    """Tarjan's components with more than one node or a self-loop, each a set."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        work = [(v, iter(sorted(graph.get(v, ()))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        while work:
            node, edges = work[-1]
            advanced = False
            for w in edges:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    advanced = True
                    break
                if w in on_stack:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == node:
                        break
                if len(comp) > 1 or node in graph.get(node, ()):
                    found.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def check(root):
    """Every finding of the tree at root, one string each (empty: the tree passes)."""
    with open(os.path.join(root, DESIGN), encoding='utf-8') as f:
        deps = parse_layers(f.read())
    findings = []
    layer_graph = {a: {b for b in targets if b != a} for a, targets in deps.items()}
    for comp in strongly_connected(layer_graph):
        findings.append('%s: the layers block has a cycle: %s' % (DESIGN, ' -> '.join(find_cycle(layer_graph, comp))))
    graph, where = {}, {}
    for path in source_files(root, EXTENSIONS):
        with open(os.path.join(root, path), encoding='utf-8', errors='replace') as f:
            text = f.read()
        graph.setdefault(path, set())
        mine = layer_of(path, deps)
        if mine is None:
            findings.append('%s:1: in no layer of %s\'s layers block' % (path, DESIGN))
        for line, target in includes_of(text):
            to = resolve(root, path, target)
            if to is None:
                findings.append('%s:%d: #include "%s" names no file of the tree' % (path, line, target))
                continue
            graph[path].add(to)
            where.setdefault((path, to), line)
            theirs = layer_of(to, deps)
            if mine and theirs and mine != theirs and theirs not in deps[mine]:
                findings.append('%s:%d: %s -> %s: includes %s, against the layer order' % (path, line, mine, theirs, to))
    for comp in strongly_connected(graph):
        cycle = find_cycle(graph, comp)
        findings.append('%s:%d: include cycle: %s' % (cycle[0], where[(cycle[0], cycle[1])], ' -> '.join(cycle)))
    return findings


def main(argv):
    if argv[1:] == ['--self-test']:
        return self_test()
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
    try:
        findings = check(root)
    except LayoutError as e:
        print(e)
        return 1
    for f in findings:
        print(f)
    print('check_includes: %d finding(s)' % len(findings) if findings else 'check_includes: OK')
    return 1 if findings else 0


SAMPLE_BLOCK = """# Layout

```layers
# a comment line
pmpi/api  -> pmpi/p2p pmpi/base pmpi/* core   # trailing comment
pmpi/p2p  -> pmpi/base pmpi/* core
pmpi/base -> core pmpi/*
pmpi/*    ->
cuda      -> core
core      ->
```
"""


def write_tree(root, files):
    for path, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
        with open(os.path.join(root, path), 'w', encoding='utf-8') as f:
            f.write(text)


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def self_test():
    expect(includes_of('#include "a.hpp"\n  #  include "b/c.hpp" // x\n#include <d.h>\n') == [(1, 'a.hpp'), (2, 'b/c.hpp')],
           'plain, spaced and system includes')
    expect(includes_of('// #include "no.hpp"\n/* #include "no2.hpp"\n*/ #include "yes.hpp"\n') == [(3, 'yes.hpp')],
           'commented includes are not includes; a comment before # is whitespace, as to the preprocessor')
    expect(includes_of('/* one\n two */\n#include "x.hpp"\n') == [(3, 'x.hpp')], 'line numbers survive block comments')
    expect(includes_of('const char *s = "// not a comment";\n#include "y.hpp"\n') == [(2, 'y.hpp')], 'strings are not comments')
    deps = parse_layers(SAMPLE_BLOCK)
    expect(deps['pmpi/api'] == {'pmpi/p2p', 'pmpi/base', 'pmpi/*', 'core'} and deps['core'] == set(), 'block parsed')
    for bad, why in [('```layers\na b -> c\n```\n', 'two names'), ('```layers\na -> b\n```\n', 'unknown layer'),
                     ('```layers\na ->\na ->\n```\n', 'twice'), ('```layers\na b\n```\n', 'no arrow'), ('text\n', 'no block')]:
        try:
            parse_layers(bad)
            expect(False, 'accepted a bad block (%s)' % why)
        except LayoutError:
            pass
    expect(layer_of('pmpi/tempi.h', deps) == 'pmpi/*', 'public header')
    expect(layer_of('pmpi/p2p/engine.cpp', deps) == 'pmpi/p2p', 'longest prefix')
    expect(layer_of('pmpi/newwing/x.cpp', deps) is None, 'a wing not in the block')
    expect(layer_of('core/backend.hpp', deps) == 'core' and layer_of('corex/a.hpp', deps) is None, 'folder prefix, not string prefix')
    g = {'a': {'b'}, 'b': {'c'}, 'c': {'a'}, 'd': {'d'}, 'e': {'a'}}
    comps = sorted(sorted(c) for c in strongly_connected(g))
    expect(comps == [['a', 'b', 'c'], ['d']], 'components: %s' % comps)
    expect(find_cycle(g, {'a', 'b', 'c'}) == ['a', 'b', 'c', 'a'], 'cycle path: %s' % find_cycle(g, {'a', 'b', 'c'}))
    expect(find_cycle(g, {'d'}) == ['d', 'd'], 'self-include')
    with tempfile.TemporaryDirectory() as root:
        write_tree(root, {
            DESIGN: SAMPLE_BLOCK,
            'pmpi/tempi.h': '#include <mpi.h>\n',
            'pmpi/api/wrap.cpp': '#include "p2p/send.hpp"\n#include "tempi.h"\n#include "backend.hpp"\n',
            'pmpi/p2p/send.hpp': '#include "base/req.hpp"\n',
            'pmpi/base/req.hpp': '#include "backend.hpp"\n',
            'core/backend.hpp': '#pragma once\n',
            'cuda/kernels.cu': '#include "backend.hpp"\n#include "check.hpp"\n',
            'cuda/check.hpp': '\n',
        })
        expect(check(root) == [], 'a clean tree: %s' % check(root))
        write_tree(root, {
            'pmpi/base/req.hpp': '#include "backend.hpp"\n// why\n#include "p2p/send.hpp"\n',
            'core/plan.hpp': '#include "check.hpp"\n#include "gone.hpp"\n',
            'pmpi/extra/x.cpp': '#include "tempi.h"\n',
        })
        found = check(root)
        want = ['pmpi/base/req.hpp:3: pmpi/base -> pmpi/p2p: includes pmpi/p2p/send.hpp, against the layer order',
                'core/plan.hpp:1: core -> cuda: includes cuda/check.hpp, against the layer order',
                'core/plan.hpp:2: #include "gone.hpp" names no file of the tree',
                'pmpi/extra/x.cpp:1: in no layer of docs/design.md\'s layers block',
                'pmpi/base/req.hpp:3: include cycle: pmpi/base/req.hpp -> pmpi/p2p/send.hpp -> pmpi/base/req.hpp']
        expect(sorted(found) == sorted(want), 'findings:\n  ' + '\n  '.join(found))
        write_tree(root, {DESIGN: SAMPLE_BLOCK.replace('core      ->', 'core      -> cuda')})
        expect(any('layers block has a cycle: core -> cuda -> core' in f for f in check(root)), 'a cycle in the block')
    print('check_includes self-test: OK')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
