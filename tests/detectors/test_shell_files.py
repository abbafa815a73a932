"""``detectors.shell_files``: the files a shell line names as read or written, and None the
moment it writes or reads something it does not name."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from detectors.shell_files import overlaps, read_paths, written_paths

_NAME = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True)
PATHS = st.lists(_NAME, min_size=1, max_size=4).map(lambda parts: "/".join(parts) + ".py")


@pytest.mark.parametrize("line, expected", [
    ("cat <<'EOF' > reproduce_issue.py\nimport django\nprint(django.VERSION)\nEOF\npython reproduce_issue.py",
     ("reproduce_issue.py",)),
    ("cat > t.py << EOF\nx = '(a) && b'\nEOF", ("t.py",)),  # the body is data, whatever it holds
    ("echo 'print(1)' > check.py && python check.py", ("check.py",)),
    ("python t.py > out.log 2>&1", ("out.log",)),
    ("python t.py > out.log 2> err.txt", ("out.log", "err.txt")),
    ("sed -i 's/a/b/' pkg/m.py", ("pkg/m.py",)),
    ("sed -i.bak -e 's/a/b/' -e 's/c/d/' a.py b.py", ("a.py", "b.py")),
    ("cd /testbed && sed -i '5s/x/y/' ./django/a.py && git diff", ("django/a.py",)),
    ("rm -f a.pyc && mkdir -p build", ("a.pyc", "build")),
    ("cp a.py b.py && mv x.py y.py", ("b.py", "x.py", "y.py")),
    ("sed -i --expression='s/x = 1/x = 2/' models.py && echo done > log.txt", ("models.py", "log.txt")),
    ("echo x > a.txt; sed -Ei 's/x/y/' models.py", ("a.txt", "models.py")),
    ("echo x > a.txt; echo 'x = 2' >| models.py", ("a.txt", "models.py")),
    ("echo x > a.txt; echo y 1>>models.py", ("a.txt", "models.py")),
    ("echo x > a.txt && python fix.py", ("a.txt",)),  # a program run, as a line of its own
    ("python t.py | tee -a log.txt", ("log.txt",)),
    ("grep -n x a.py", ()),
])
def test_the_files_a_write_names(line, expected):
    assert written_paths(line) == expected


@pytest.mark.parametrize("line", [
    "git checkout django/a.py",  # git's files are its own business
    "patch -p1 < fix.diff",
    "pip install -e .",
    "perl -pi -e 's/a/b/' a.py",
    "python - <<'EOF'\nopen('a.py', 'w').write('x')\nEOF",  # run now, writing a file it names in code
    "cat > fix.py <<'EOF'\nfrom pathlib import Path\nPath('a.py').write_text('')\nEOF",  # a script that writes, for later
    "echo x > $HOME/notes.txt",  # a path only the shell knows
    "echo x > ../up.txt",
    "(cd sub && echo x > a.txt)",  # a subshell
    "cp -t dest a.py",
    "rm -rf build dist",  # directories: a file read relative to one names none of them
    "cp a.py backup/",
    "mv src/pkg dst",
    "echo x > a.txt; sort -o models.py models.py",  # a program not known here
    "echo x > a.txt; echo models.py | xargs rm",
    "echo x > a.txt; sh -c 'rm models.py'",
    "echo `rm -f models.py` > log.txt",  # a substitution
    "sed -i 's/x/y/' src/{a,b}.py",  # brace expansion
    "mv models.py{,.orig}",
    "echo 'unclosed > a.txt",  # unbalanced quote
])
def test_a_write_whose_files_are_not_named_is_unknown(line):
    assert written_paths(line) is None


@pytest.mark.parametrize("line, expected", [
    ("cat django/db/models/base.py", ("django/db/models/base.py",)),
    ("nl -ba src/a.py | sed -n '120,160p'", ("src/a.py",)),
    ("sed -n '1,220p' a.py | sed -n '150,190p'", ("a.py",)),
    ("grep -n \"def f\" -A 15 a/b.py", ("a/b.py",)),
    ("grep -n 'a|b' a.py b.py | head -5", ("a.py", "b.py")),
    ("cat a.py | grep -A 20 'class X'", ("a.py",)),
    ("head -n 40 a.py && tail -20 b.py", ("a.py", "b.py")),
    ("wc -l < a.py", ("a.py",)),
])
def test_the_files_a_read_names(line, expected):
    assert read_paths(line) == expected


@pytest.mark.parametrize("line", [
    "ls -la src",  # a listing: any program run may add to it
    "grep -rn foo src",  # a tree
    "grep -n foo .",
    "find . -name '*.py'",
    "git diff",
    "python reproduce_issue.py",
    "grep foo",  # reads its input
    "cat a.py > b.py",  # writes
    "sed -i 's/a/b/' a.py",
    "cat $HOME/a.py",
    "",
    "cat pkg/*.py",  # a glob
    "cat {a,b}.py",
    "grep -f pats.txt models.py",  # reads the patterns' file too
    "sed -n -f show.sed f.py",
    "sed -n '1r other.txt' f.py",  # a script that reads, writes or runs
    "sed -n '/def/w out.txt' f.py",
    "tail -f log.txt",
    "diff -r a b",
    "uniq in.txt out.txt",
    "cat <<< hello > f.txt",
])
def test_a_line_that_reads_more_than_named_files_is_no_read_of_them(line):
    assert read_paths(line) is None


def test_paths_overlap_when_they_may_name_the_same_file_or_a_directory_holding_it():
    assert overlaps("/testbed/django/db/models/base.py", "django/db/models/base.py")
    assert overlaps("base.py", "django/db/models/base.py")  # relative to somewhere: may be it
    assert overlaps("django/db", "django/db/models/base.py")  # a directory holding it
    assert overlaps("./a.py", "a.py")
    assert not overlaps("django/db/models/base.py", "reproduce_issue.py")
    assert not overlaps("django/db/models/base.py", "django/forms/base.py")
    assert overlaps("../a.py", "b.py")  # cannot tell: taken for the same
    # a Windows harness's declared paths, spelled with backslashes
    assert overlaps("C:\\repo\\src\\a.py", "C:/repo/src/a.py") and overlaps("C:\\repo\\src\\a.py", "src/a.py")
    assert not overlaps("C:\\repo\\src\\a.py", "src/b.py")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["redirect", "append", "tee", "sed", "rm", "touch"]), PATHS),
                min_size=1, max_size=5))
def test_a_line_of_named_writes_gives_exactly_their_files(writes):
    forms = {"redirect": "echo x > {}", "append": "printf 'y\\n' >> {}", "tee": "python t.py | tee {}",
             "sed": "sed -i 's/a/b/' {}", "rm": "rm -f {}", "touch": "touch {}"}
    line = " && ".join(forms[kind].format(path) for kind, path in writes)
    assert written_paths(line) == tuple(dict.fromkeys(path for _, path in writes))
    assert read_paths(line) is None
    # one write that names no file makes the whole line's files unknown
    assert written_paths(line + " && git stash") is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["cat", "nl", "sed", "grep", "head"]), PATHS), min_size=1, max_size=4))
def test_a_line_of_named_reads_gives_exactly_their_files(reads):
    forms = {"cat": "cat {}", "nl": "nl -ba {} | sed -n '3,9p'", "sed": "sed -n '10,20p' {}",
             "grep": "grep -n 'def f' -A 5 {}", "head": "head -n 30 {}"}
    line = " && ".join(forms[kind].format(path) for kind, path in reads)
    assert read_paths(line) == tuple(dict.fromkeys(path for _, path in reads))
    assert written_paths(line) == ()
    assert read_paths(line + " && ls") is None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", "b.py", ".", "/", " ", ">", ">>", "|", "&", ";", "'", '"', "<", "<<", "EOF", "(", ")",
                                  "$", "\n", "-i", "sed", "cat", "rm", "grep", "-n", "2>&1", "tee", "cd"]) | st.text(max_size=3),
                max_size=40).map("".join))
def test_any_text_gives_paths_or_none_and_never_raises(text):
    for result in (written_paths(text), read_paths(text)):
        assert result is None or all(isinstance(p, str) and p for p in result)


@given(PATHS, PATHS)
def test_overlap_is_symmetric_and_reflexive(a, b):
    assert overlaps(a, b) == overlaps(b, a)
    assert overlaps(a, a) and overlaps(a, "/root/" + a)
