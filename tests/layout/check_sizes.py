#!/usr/bin/env python3
"""Library sources a reader can hold: fails (rc 1, one line per finding) on a source file of
pmpi/, core/ or cuda/ (.cpp .hpp .cu .cuh .h) over 900 lines, or a function over 120 lines.

Functions are found by a heuristic over C++ and CUDA, not a parser: comments, string and
character literals (raw strings and digit separators included) and preprocessor lines are
blanked first; then braces are matched. A brace opened at namespace or class scope after a
parameter list is a function body (free function, member, constructor after its
initializer list, kernel, operator, or a lambda given a name there), and everything up to
its matching brace counts toward it: lambdas, local classes and blocks nested in a
function are part of that function. A function's length runs from the first line of its
declaration (template line and return type included) to its closing brace. Braces of
initializers (`int a[] = {..}`, `Foo f{..}`, a member's `a_{x}`) are not bodies.

    python3 tests/layout/check_sizes.py [SOURCE_ROOT]   # default: this checkout
    python3 tests/layout/check_sizes.py --self-test
"""
import os
import re
import sys

from library_files import source_files

EXTENSIONS = ('.cpp', '.hpp', '.cu', '.cuh', '.h')
MAX_FILE_LINES = 900
MAX_FUNCTION_LINES = 120
IDENT = re.compile(r'[A-Za-z_0-9]')
RAW_PREFIXES = ('R', 'u8R', 'uR', 'UR', 'LR')
# Words before a parenthesis that never name a function: attributes, specifiers, types.
NOT_A_NAME = {'__launch_bounds__', 'alignas', '__attribute__', '__declspec', 'decltype', 'noexcept',
              'requires', 'sizeof', 'alignof', 'void', 'int', 'char', 'bool', 'float', 'double', 'long',
              'short', 'unsigned', 'signed', 'auto', 'throw', 'static_assert'}
# A parameter list's closing parenthesis, its qualifiers, then one colon: a constructor's
# initializer list follows.
INIT_LIST = re.compile(r'\)(?:\s|\bconst\b|\bvolatile\b|\bnoexcept\b|&)*:(?!:)')


def blank(text, start, end):
    """text[start:end] as spaces, its newlines kept."""
    return re.sub(r'[^\n]', ' ', text[start:end])


def literal_end(text, i, quote):
    """The index after the literal that opens at text[i] (a quote); it ends at its closing
    quote or, if unterminated, at the end of the line."""
    j, n = i + 1, len(text)
    while j < n and text[j] != quote and text[j] != '\n':
        j += 2 if text[j] == '\\' else 1
    return min(j + 1, n)


def clean(text):
    """The source with comments, literals' contents and preprocessor lines blanked; newlines
    stay where they were, so line numbers and brace positions hold."""
    out, i, n, line_start = [], 0, len(text), True
    while i < n:
        c = text[i]
        if line_start and c == '#':
            j = i
            while j < n and (text[j] != '\n' or text[j - 1] == '\\'):
                j += 1
            out.append(blank(text, i, j))
            i = j
            continue
        if c == '\n':
            line_start = True
        elif not c.isspace():
            line_start = False
        if text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append(blank(text, i, j))
            i = j
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(blank(text, i, j))
            i = j
        elif c == '"' and token_before(text, i) in RAW_PREFIXES:
            delim = text[i + 1:text.find('(', i)]
            close = text.find(')' + delim + '"', i)
            j = n if close < 0 else close + len(delim) + 2
            out.append('"' + blank(text, i + 1, j - 1) + '"')
            i = j
        elif c == '"' or (c == "'" and not digit_separator(text, i)):
            j = literal_end(text, i, c)
            out.append(c + blank(text, i + 1, j - 1) + c)
            i = j
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def token_before(text, i):
    """The identifier characters that end right before text[i]."""
    j = i
    while j > 0 and IDENT.match(text[j - 1]):
        j -= 1
    return text[j:i]


def digit_separator(text, i):
    """Whether the ' at text[i] is inside a number (1'000'000), not a character literal."""
    j = i
    while j > 0 and (IDENT.match(text[j - 1]) or text[j - 1] == "'"):
        j -= 1
    return j < i and text[j].isdigit()


def matching(text, i):
    """The index of the brace that closes the one at text[i] (len(text) if none)."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] == '{':
            depth += 1
        elif text[j] == '}':
            depth -= 1
            if depth == 0:
                return j
    return len(text)


def paren_groups(header):
    """[(open, close)] of the parenthesis groups at depth 0 of a declaration's text, and the
    depth left open at its end."""
    groups, depth, start = [], 0, 0
    for k, c in enumerate(header):
        if c == '(':
            if depth == 0:
                start = k
            depth += 1
        elif c == ')' and depth > 0:
            depth -= 1
            if depth == 0:
                groups.append((start, k))
    return groups, depth


def strip_access(header):
    """The declaration without leading white space and access specifiers (public:)."""
    h = header.lstrip()
    m = re.match(r'((public|private|protected)\s*:(?!:)\s*)*', h)
    return h[m.end():]


def strip_template(header):
    """The declaration without leading access specifiers and template<...> heads."""
    h = strip_access(header)
    while True:
        m = re.match(r'template\s*<', h)
        if not m:
            return h
        depth, k = 1, m.end()
        while k < len(h) and depth:
            depth += {'<': 1, '>': -1}.get(h[k], 0)
            k += 1
        h = h[k:].lstrip()


def called_name(header, start):
    """The identifier right before the parenthesis at header[start], if any."""
    m = re.search(r'([A-Za-z_]\w*)\s*$', header[:start])
    return m.group(1) if m else None


def function_name(header, groups):
    """(name, where its declaration starts) for a declaration whose last parameter list is
    among groups, or None when no parameter list follows a name (an initializer, a type).
    Taken from the end, so that attributes (__launch_bounds__(256)) and calls of macros
    written without a semicolon before the declaration are not the name; such a call ends
    what came before the declaration."""
    for g in range(len(groups) - 1, -1, -1):
        start, end = groups[g]
        before = header[:start].rstrip()
        first_group = g
        m = re.search(r'((?:[A-Za-z_]\w*\s*::\s*)*operator)$', before)
        if m and header[start + 1:end].strip() == '':
            name = re.sub(r'\s+', '', m.group(1)) + '()'  # operator(); its parameters come next
        elif re.search(r'operator\s*(\[\s*\]|[^\w\s()]+|\w[\w\s:*&<>]*)$', before):
            m = re.search(r'((?:[A-Za-z_]\w*\s*::\s*)*operator\s*(?:\[\s*\]|[^\w\s()]+|\w[\w\s:*&<>]*))$', before)
            name = re.sub(r'operator (?=\W)', 'operator', re.sub(r'\s+', ' ', m.group(1)))
        else:
            m = re.search(r'(~?[A-Za-z_]\w*(?:\s*::\s*~?[A-Za-z_]\w*)*)\s*(<[^()]*>)?$', before)
            lam = re.search(r'([A-Za-z_]\w*)\s*=\s*\[[^\]]*\]\s*$', before)
            if m and m.group(1).split('::')[-1].strip() not in NOT_A_NAME:
                name = re.sub(r'\s+', '', m.group(1))
            elif lam:
                name = lam.group(1)  # a lambda given a name at namespace scope
            elif before.endswith(')') and g > 0 and called_name(header, groups[g - 1][0]) not in NOT_A_NAME | {None}:
                prev = groups[g - 1]  # a macro that makes the name: TEMPI_WRAPPER(MPI_Send)(...)
                name = called_name(header, prev[0]) + header[prev[0]:prev[1] + 1]
                first_group = g - 1
            else:
                continue
        begin = 0
        for k in range(first_group - 1, -1, -1):
            if called_name(header, groups[k][0]) not in NOT_A_NAME | {None}:
                begin = groups[k][1] + 1
                break
        return name, begin + len(header[begin:]) - len(header[begin:].lstrip())
    return None


def classify(header):
    """What a brace at namespace or class scope opens: (kind, name, offset of the
    declaration in header); kind 'ns', 'class', 'func', 'skip' (a brace inside the
    declaration, an argument or a member initializer, that does not end it) or 'init'
    (an initializer's braces)."""
    h = strip_access(header)
    offset = len(header) - len(h)
    head = strip_template(h)
    if re.match(r'(inline\s+)?namespace\b', head) or re.match(r'extern\s*"[^"]*"\s*$', head):
        return 'ns', None, 0
    groups, open_depth = paren_groups(h)
    if open_depth > 0:
        return 'skip', None, 0
    if re.match(r'(typedef\s+)?(class|struct|union|enum)\b', head) and not (groups and head.rstrip().endswith(')')):
        return 'class', None, 0
    init_list = INIT_LIST.search(h)
    if init_list:
        if re.search(r'[\w>]\s*$', h):
            return 'skip', None, 0  # a member's brace initializer: a_{x}
        groups = [g for g in groups if g[1] < init_list.start() + 1]
    found = function_name(h, groups)
    if not found:
        return 'init', None, 0
    return 'func', found[0], offset + found[1]


def functions(text):
    """[(line, name, length)] of every function body found in a source text."""
    code = clean(text)
    found, stack, header_start, i, n = [], [], 0, 0, len(code)
    while i < n:
        c = code[i]
        if c == '{':
            kind, name, offset = classify(code[header_start:i])
            if kind in ('ns', 'class'):
                stack.append(kind)
                header_start = i + 1
            elif kind == 'skip':
                i = matching(code, i)
            else:
                end = matching(code, i)
                if kind == 'func':
                    first = header_start + offset
                    found.append((code.count('\n', 0, first) + 1, name, code.count('\n', first, end) + 1))
                    header_start = end + 1
                i = end
        elif c == '}':
            if stack:
                stack.pop()
            header_start = i + 1
        elif c == ';':
            header_start = i + 1
        i += 1
    return found


def check(root):
    """Every finding of the tree at root, one string each (empty: the tree passes)."""
    findings = []
    for path in source_files(root, EXTENSIONS):
        with open(os.path.join(root, path), encoding='utf-8', errors='replace') as f:
            text = f.read()
        lines = len(text.splitlines())
        if lines > MAX_FILE_LINES:
            findings.append('%s:1: file of %d lines (at most %d)' % (path, lines, MAX_FILE_LINES))
        for line, name, length in functions(text):
            if length > MAX_FUNCTION_LINES:
                findings.append('%s:%d: %s is %d lines (at most %d)' % (path, line, name, length, MAX_FUNCTION_LINES))
    return findings


def main(argv):
    if argv[1:] == ['--self-test']:
        return self_test()
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
    findings = check(root)
    for f in findings:
        print(f)
    print('check_sizes: %d finding(s)' % len(findings) if findings else 'check_sizes: OK')
    return 1 if findings else 0


SAMPLE = r'''// A sample: braces in comments { and strings must not count.
#include "x.hpp"
#define CHECK(x) do { if (!(x)) abort(); } while (0)
namespace tempi {
namespace {
const int kTable[] = {1, 2, 3};
const char *kText = "}}} {";
char open_brace = '{';
long big = 1'000'000;
const char *raw = R"x(} } {)x";
}  // namespace

int add(int a,
        int b) {
  auto f = [&](int c) {
    return c + 1;
  };
  struct Local { int g() { return 1; } };
  return f(a) + b;
}

template <typename T>
T twice(T t) { return t + t; }

class Pool : public Base {
 public:
  Pool(int n) : n_{n}, v_(n) {
    grow();
  }
  ~Pool() override {}
  int operator()(int k) const { return k; }
  bool operator==(const Pool &o) const noexcept { return n_ == o.n_; }
  std::vector<int> members{1, 2};

 private:
  void grow();
  int n_ = {0};
};

void Pool::grow() {
  /* } */
  if (n_) {
  }
}

__global__ void __launch_bounds__(256) kernel(char *p) { p[0] = 0; }
int TEMPI_WRAPPER(MPI_Send)(const void *buf) {
  return 0;
}
extern "C" {
int c_call(void) { return 0; }
}
auto named = [](int x) {
  return x;
};
enum class Kind : int { a, b };
}  // namespace tempi
'''


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def self_test():
    code = clean(SAMPLE)
    expect(len(code) == len(SAMPLE) and code.count('\n') == SAMPLE.count('\n'), 'clean keeps positions')
    expect(code.count('{') == code.count('}'), 'balanced braces once literals and comments are blank')
    expect("1'000'000" in code and "'{'" not in code, 'digit separators kept, character literals blanked')
    expect('abort' not in code and 'x.hpp' not in code, 'preprocessor lines blanked')
    got = [(name, line, length) for line, name, length in functions(SAMPLE)]
    want = [('add', 13, 8), ('twice', 22, 2), ('Pool', 27, 3), ('~Pool', 30, 1), ('operator()', 31, 1),
            ('operator==', 32, 1), ('Pool::grow', 40, 5), ('kernel', 46, 1),
            ('TEMPI_WRAPPER(MPI_Send)', 47, 3), ('c_call', 51, 1), ('named', 53, 3)]
    expect(got == want, 'functions:\n  got  %s\n  want %s' % (got, want))
    long_body = 'void f() {\n' + '  x();\n' * 119 + '}\n'
    expect(functions(long_body) == [(1, 'f', 121)], 'length counts both brace lines')
    expect(functions('int a = f({1, 2});\nint g(int x = {}) {\n  return x;\n}\n') == [(2, 'g', 3)],
           'braces inside a call or a default argument')
    expect(functions('std::function<void()> cb{nullptr};\nFoo make() {\n}\n') == [(2, 'make', 2)],
           'an initializer whose type has parentheses')
    macros = 'MAKE(a, (int x), (x))\nMAKE(b, (int y), (y))\n\nint after(int z) noexcept(true) {\n  return z;\n}\n'
    expect(functions(macros) == [(4, 'after', 3)], 'calls of macros without a semicolon: %s' % functions(macros))
    trailing = 'template <class T>\nauto get(T t) -> decltype(t.x) {\n  return t.x;\n}\n'
    expect(functions(trailing) == [(1, 'get', 4)], 'trailing return type: %s' % functions(trailing))
    print('check_sizes self-test: OK')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
