"""A weights folder to measure with (`training/weights_folder.py`): the shipped files linked, and the files a
run writes kept in the folder, so that writing them never changes a shipped file."""

from __future__ import annotations

from training import weights_folder as W


def test_linked_weights_never_lets_a_write_reach_the_shipped_files(tmp_path, monkeypatch):
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    for name in ("reader.onnx", "reader_heads.json", "local_judge.json"):
        (shipped / name).write_text(f"shipped {name}")
    monkeypatch.setattr(W, "SHIPPED", shipped)
    out = tmp_path / "out"
    # an earlier folder left links where this one writes its own files
    out.mkdir()
    (out / "reader.onnx").symlink_to(shipped / "reader.onnx")
    (out / "reader_heads.json").symlink_to(shipped / "reader_heads.json")
    W.linked_weights(out, own=("reader.onnx",), copied=("reader_heads.json",))
    assert (out / "local_judge.json").is_symlink() and (out / "local_judge.json").read_text() == "shipped local_judge.json"
    assert not (out / "reader.onnx").exists()  # the caller writes it
    assert not (out / "reader_heads.json").is_symlink()
    (out / "reader.onnx").write_text("run's reader")
    (out / "reader_heads.json").write_text("run's heads")
    assert (shipped / "reader.onnx").read_text() == "shipped reader.onnx"
    assert (shipped / "reader_heads.json").read_text() == "shipped reader_heads.json"
    # built again: the folder's own files stay
    W.linked_weights(out, own=("reader.onnx",), copied=("reader_heads.json",))
    assert (out / "reader.onnx").read_text() == "run's reader"
    assert (out / "reader_heads.json").read_text() == "run's heads"
