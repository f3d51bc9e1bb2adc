"""Finding the document files that paths name: folders walked in a fixed order, hidden files
passed over, other formats skipped with the reason, links followed without looping, each real
file listed once, and a path that names nothing refused in one line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from qa_finetune.documents.walking import DocumentReadError, FoundFile, find_documents

FORMATS = ".txt, .md, .markdown, .html, .htm, .pdf"


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def _names(found: list[FoundFile]) -> list[str]:
    return [f.name for f in found]


def _reasons(skipped: list) -> list[tuple[str, str]]:
    return [(str(s.path), s.reason) for s in skipped]


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    return _tree(
        tmp_path / "docs",
        {
            "b.txt": "b",
            "a.md": "a",
            "a/z.HTML": "z",
            "a/deep/x.pdf": "x",
            "c.markdown": "c",
            "d.htm": "d",
            "logo.png": "not read",
            "README": "no suffix",
            "data.json": "{}",
            ".hidden.txt": "passed over",
            ".git/config.txt": "passed over",
        },
    )


def test_a_folder_is_walked_sorted_and_depth_first(docs: Path) -> None:
    found, skipped = find_documents([docs])
    assert _names(found) == [
        f"{docs}/a/deep/x.pdf",
        f"{docs}/a/z.HTML",
        f"{docs}/a.md",
        f"{docs}/b.txt",
        f"{docs}/c.markdown",
        f"{docs}/d.htm",
    ]
    assert found[0] == FoundFile(docs / "a" / "deep" / "x.pdf", f"{docs}/a/deep/x.pdf", ".pdf")
    assert [f.suffix for f in found] == [".pdf", ".html", ".md", ".txt", ".markdown", ".htm"]
    assert _reasons(skipped) == [
        (f"{docs}/README", "unsupported format (no suffix)"),
        (f"{docs}/data.json", "unsupported format (.json; name a SQuAD file on its own)"),
        (f"{docs}/logo.png", "unsupported format (.png)"),
    ]
    assert str(skipped[2]) == f"skipped {docs}/logo.png: unsupported format (.png)"
    again, skipped_again = find_documents([docs])  # the same folder, the same lists
    assert (again, _reasons(skipped_again)) == (found, _reasons(skipped))


def test_names_keep_the_folder_as_given(docs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(docs.parent)
    found, _ = find_documents([Path("docs/")])
    assert _names(found)[:2] == ["docs/a/deep/x.pdf", "docs/a/z.HTML"]
    assert found[0].path == Path("docs/a/deep/x.pdf")
    monkeypatch.chdir(docs / "a")
    assert _names(find_documents([Path(".")])[0]) == ["deep/x.pdf", "z.HTML"]


def test_named_files_come_in_the_order_given_named_as_given(
    docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(docs)
    paths = [Path("d.htm"), Path("a/../b.txt"), Path("data.json"), Path("a")]
    found, skipped = find_documents(paths)
    assert [(f.name, f.suffix) for f in found] == [
        ("d.htm", ".htm"),
        ("a/../b.txt", ".txt"),
        ("data.json", ".json"),  # named: a SQuAD file
        ("a/deep/x.pdf", ".pdf"),
        ("a/z.HTML", ".html"),
    ]
    assert skipped == []


def test_each_real_file_is_listed_once(docs: Path, tmp_path: Path) -> None:
    os.symlink(docs / "b.txt", tmp_path / "link.txt")
    os.link(docs / "a.md", docs / "a" / "hard.md")
    found, _ = find_documents([docs / "b.txt", docs, tmp_path / "link.txt", docs / "a"])
    names = _names(found)
    assert names[0] == f"{docs}/b.txt" and f"{tmp_path}/link.txt" not in names
    assert names.count(f"{docs}/b.txt") == 1 and f"{docs}/a/hard.md" in names
    assert f"{docs}/a.md" not in names  # the hard link, met first, names it
    assert len(names) == 6


def test_links_inside_are_followed_and_a_loop_is_skipped(tmp_path: Path) -> None:
    root = _tree(tmp_path / "root", {"a/one.txt": "1", "outside/two.txt": "2"})
    os.symlink("..", root / "a" / "loop")  # back to root: a loop
    os.symlink("loop.txt", root / "a" / "loop.txt")  # itself
    os.symlink("missing.txt", root / "a" / "gone.txt")
    os.symlink("../outside/two.txt", root / "a" / "two.md")  # a file link inside: followed
    os.symlink("../outside", root / "a" / "z")  # a folder link inside: its files once
    found, skipped = find_documents([root])
    # outside/two.txt was met first through the link: listed once, under the link's name.
    assert _names(found) == [f"{root}/a/one.txt", f"{root}/a/two.md"]
    assert found[1].path.read_text() == "2"
    assert _reasons(skipped) == [
        (f"{root}/a/gone.txt", "broken symbolic link"),
        (f"{root}/a/loop", "symbolic link loop"),
        (f"{root}/a/loop.txt", "symbolic link loop"),
    ]


def test_a_file_name_that_is_not_utf8_is_shown_with_escapes(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    with open(os.path.join(os.fsencode(folder), b"caf\xe9.txt"), "wb") as handle:
        handle.write(b"text")
    found, _ = find_documents([folder])
    assert _names(found) == [f"{folder}/caf\\xe9.txt"]
    assert found[0].path.read_bytes() == b"text"


def _refusal(paths: list[Path]) -> str:
    with pytest.raises(DocumentReadError) as refused:
        find_documents(paths)
    message = str(refused.value)
    assert "\n" not in message
    return message


def test_paths_that_name_no_documents_are_refused_in_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    images = _tree(tmp_path / "images", {"a.png": "", ".b.txt": ""})
    (tmp_path / "photo.png").write_bytes(b"\x89PNG")
    os.symlink("nowhere.txt", tmp_path / "dangling.txt")
    holds_none = "holds no documents ({}): name a folder with such files, or the files themselves"
    assert _refusal([empty]) == f"{empty} {holds_none.format(FORMATS)}"
    assert _refusal([images]) == f"{images} {holds_none.format(FORMATS)}"
    assert _refusal([tmp_path / "missing.txt"]) == (
        f"document not found: {tmp_path}/missing.txt (name files ({FORMATS}), SQuAD .json "
        "files or folders)"
    )
    assert _refusal([tmp_path / "photo.png"]) == (
        f"{tmp_path}/photo.png: not a document ({FORMATS}) nor a SQuAD .json file, nor a "
        "folder: name those"
    )
    assert _refusal([tmp_path / "dangling.txt"]) == (
        f"document not found: {tmp_path}/dangling.txt is a symbolic link to nothing (or a "
        "loop): name the file itself"
    )
    assert _refusal([]) == f"no documents given: name files ({FORMATS}) or folders of them"


def test_a_named_folder_loop_is_refused_not_walked(tmp_path: Path) -> None:
    os.symlink("b", tmp_path / "a")
    os.symlink("a", tmp_path / "b")
    assert "is a symbolic link to nothing (or a loop)" in _refusal([tmp_path / "a"])


def test_a_link_out_of_the_folder_is_skipped(tmp_path: Path) -> None:
    root = _tree(tmp_path / "root", {"a/one.txt": "1"})
    _tree(tmp_path, {"sibling/two.txt": "2"})
    os.symlink("../..", root / "a" / "up")  # out, to the folder holding root and sibling
    os.symlink("../../sibling/two.txt", root / "a" / "two.txt")
    found, skipped = find_documents([root])
    assert _names(found) == [f"{root}/a/one.txt"]
    assert _reasons(skipped) == [
        (
            f"{root}/a/two.txt",
            "symbolic link out of the folder (to ../../sibling/two.txt): not followed",
        ),
        (f"{root}/a/up", "symbolic link out of the folder (to ../..): not followed"),
    ]
