"""Data files are checked before Ray starts: existence, format and the schema of their first rows."""

from tests.utils.dataset.rows import make_row, write_jsonl, write_parquet
from verl.trainer.config.data import CustomClsConfig, DataConfig
from verl.utils.dataset.preflight import check_data_files


def test_good_files_and_builtin_data_pass(tmp_path):
    train = write_parquet([make_row("1+1?", "2", i) for i in range(20)], tmp_path / "train.parquet")
    val = write_jsonl([make_row("2+2?", "4")], tmp_path / "val.jsonl")
    assert check_data_files(DataConfig(train_files=[train], val_files=val)) == []
    assert check_data_files(DataConfig(train_files="builtin://arithmetic/train", val_files=None)) == []


def test_missing_files_are_named_with_what_is_there(tmp_path):
    write_parquet([make_row("1+1?")], tmp_path / "train.parquet")
    errors = check_data_files(
        DataConfig(train_files=str(tmp_path / "trian.parquet"), val_files=str(tmp_path / "nowhere" / "test.parquet"))
    )
    assert errors == [
        f"data.train_files: {tmp_path / 'trian.parquet'} does not exist (data files in {tmp_path}: train.parquet)",
        f"data.val_files: {tmp_path / 'nowhere' / 'test.parquet'} does not exist (its folder "
        f"{tmp_path / 'nowhere'} does not exist either)",
    ]


def test_schema_of_the_first_rows_is_checked(tmp_path):
    rows = [make_row("fine")] * 3 + [{k: v for k, v in make_row("no source").items() if k != "data_source"}]
    train = write_jsonl(rows, tmp_path / "train.jsonl")
    bad_format = tmp_path / "train.csv"
    bad_format.write_text("a,b\n")
    errors = check_data_files(DataConfig(train_files=[train, str(bad_format)], val_files=None))
    assert errors[0].startswith(f"data.train_files: {train}: row 3 (0-based) is missing the field 'data_source'.")
    assert errors[1] == f"data.train_files: {bad_format} has an unsupported format; use one of .parquet, .jsonl, .json"
    # a user dataset class reads its own schema: only existence is checked
    custom = DataConfig(train_files=train, val_files=None, custom_cls=CustomClsConfig(path="my.py", name="MyData"))
    assert check_data_files(custom) == []
