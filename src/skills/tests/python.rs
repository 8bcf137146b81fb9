//! The shipped skills in Python: each imports, defines its function and behaves as documented.

use std::path::Path;

/// Every shipped skill imports, defines its function, works through `exec`, and behaves as
/// documented (needs `python3` on the PATH, as the client tests do).
#[test]
fn shipped_skills_work_in_python() {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("skills");
    let out = std::process::Command::new("python3")
        .arg("-I")
        .arg("-c")
        .arg(PYTHON_CHECK)
        .arg(&shipped)
        .output()
        .expect("run python3 (install Python 3 to run the tests)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("ok: filter_high_risk"), "{stdout}");
}

const PYTHON_CHECK: &str = r#"
import ast, importlib.util, json, os, sys, tempfile
shipped = sys.argv[1]
names = sorted(f[:-3] for f in os.listdir(shipped) if f.endswith('.py'))
assert names, 'no shipped skills'

# `from skills import NAME` through a package whose __getattr__ returns NAME from NAME.py,
# the way the sandbox exposes the store.
pkg_root = tempfile.mkdtemp()
os.mkdir(os.path.join(pkg_root, 'skills'))
with open(os.path.join(pkg_root, 'skills', '__init__.py'), 'w') as f:
    f.write('import importlib\n'
            'def __getattr__(name):\n'
            '    if name.startswith("__"): raise AttributeError(name)\n'
            '    fn = getattr(importlib.import_module(__name__ + "." + name), name)\n'
            # importing the submodule binds skills.NAME to the module: rebind it to the function
            '    globals()[name] = fn\n'
            '    return fn\n')
for n in names:
    with open(os.path.join(shipped, n + '.py')) as src, \
         open(os.path.join(pkg_root, 'skills', n + '.py'), 'w') as dst:
        dst.write(src.read())
sys.path.insert(0, pkg_root)

funcs = {}
for n in names:
    code = open(os.path.join(shipped, n + '.py'), encoding='utf-8').read()
    tree = ast.parse(code)
    assert ast.get_docstring(tree), n + ': module docstring'
    meta = json.load(open(os.path.join(shipped, n + '.json')))
    assert meta['description'].strip(), n + ': description'
    assert meta.get('name', n) == n
    ns = {}
    exec(code, ns)
    assert callable(ns[n]), n + ': exec defines it'
    mod = __import__('skills', fromlist=[n])
    f = getattr(mod, n)
    assert callable(f) and f.__name__ == n, n + ': from skills import'
    assert f.__doc__, n + ': function docstring'
    funcs[n] = f

def check(name, fn):
    if name in funcs:
        fn(funcs[name]); print('ok:', name)
    else:
        print('missing check target:', name)

def t_filter(f):
    vulns = [{'id': 1, 'severity': 'low'}, {'id': 2, 'severity': 'critical'},
             {'id': 3, 'severity': 'high'}, {'id': 4, 'severity': 'High'},
             {'id': 5, 'severity': 'medium'}]
    assert f(vulns) == [v for v in vulns if v['severity'] in ['high', 'critical']]
    assert [v['id'] for v in f(vulns)] == [2, 3]
    assert f([]) == []
    try:
        f([{'id': 1}]); raise AssertionError('KeyError expected')
    except KeyError:
        pass
check('filter_high_risk', t_filter)

def t_group(f):
    rows = [{'s': 200}, {'s': 404}, {'s': 200}, {}, {'s': [1]}, {'s': 200}, {'s': 404}]
    r = f(rows, 's')
    assert r == {200: 3, 404: 2, None: 1, '[1]': 1}, r
    assert list(r)[:2] == [200, 404]
    assert f(rows, lambda row: 's' in row) == {True: 6, False: 1}
    assert f([], 's') == {}
    assert f(iter([{'a': 1}]), 'a') == {1: 1}
check('group_count', t_group)

def t_top(f):
    rows = [{'n': 5}, {'n': 1}, {'n': None}, {}, {'n': 9}, {'n': 5, 'x': 1}]
    assert [r['n'] for r in f(rows, 'n')] == [9, 5, 5, 1]
    assert f(rows, 'n')[1] == {'n': 5}, 'ties keep input order'
    assert [r['n'] for r in f(rows, 'n', n=2, reverse=False)] == [1, 5]
    assert [r['n'] for r in f(rows, lambda r: -(r.get('n') or 0), n=1)] == [None]
    mixed = [{'n': 'b'}, {'n': 3}, {'n': 'a'}, {'n': 10}]
    assert [r['n'] for r in f(mixed, 'n')] == [10, 3, 'b', 'a']
    assert [r['n'] for r in f(mixed, 'n', reverse=False)] == [3, 10, 'a', 'b']
    assert f([], 'n') == []
    big = [{'n': i} for i in range(100000)]
    assert [r['n'] for r in f(big, 'n', n=3)] == [99999, 99998, 99997]
check('top_n', t_top)

def t_csv(f):
    text = '\ufeffname, zip ,count,price,note\nalice,007,42,3.50,\nbob,12345,-7,1e-3,N/A\n\ncarol,1\n'
    rows = f(text)
    assert rows[0] == {'name': 'alice', 'zip': '007', 'count': 42, 'price': 3.5, 'note': ''}, rows[0]
    assert rows[1] == {'name': 'bob', 'zip': 12345, 'count': -7, 'price': 0.001, 'note': 'N/A'}, rows[1]
    assert rows[2] == {'name': 'carol', 'zip': 1, 'count': None, 'price': None, 'note': None}, rows[2]
    assert len(rows) == 3
    assert f('a;b\n1;"x;y"\n') == [{'a': 1, 'b': 'x;y'}]
    assert f('a\tb\n1\t2\n', convert=False) == [{'a': '1', 'b': '2'}]
    assert f('a,b\n1,2,3\n') == [{'a': 1, 'b': 2, '_extra': ['3']}]
    assert f('a,b\n"multi\nline",2\n') == [{'a': 'multi\nline', 'b': 2}]
    assert f('') == []
    assert f('only\nx\ny\n') == [{'only': 'x'}, {'only': 'y'}]
check('csv_to_dicts', t_csv)

def t_flat(f):
    doc = {'user': {'id': 7, 'tags': ['a', 'b'], 'meta': {}}, 'ok': True, 'list': []}
    assert f(doc) == {'user.id': 7, 'user.tags.0': 'a', 'user.tags.1': 'b', 'user.meta': {},
                      'ok': True, 'list': []}, f(doc)
    assert list(f(doc))[:3] == ['user.id', 'user.tags.0', 'user.tags.1']
    assert f({'a': {'b': 1}}, sep='/') == {'a/b': 1}
    assert f([{'x': 1}, 2]) == {'0.x': 1, '1': 2}
    assert f({}) == {} and f([]) == {}
    assert f(5) == {'': 5}
    assert f({1: {2: 3}}) == {'1.2': 3}
    deep = cur = {}
    for _ in range(5000):
        cur['k'] = {}; cur = cur['k']
    cur['v'] = 1
    assert list(f(deep).values()) == [1], 'no recursion limit'
check('flatten_json', t_flat)
print('checked', len(names), 'skills')
"#;
