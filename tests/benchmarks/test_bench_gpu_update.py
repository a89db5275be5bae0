"""The update benchmark's closing table."""


def _row(shape, variant, step_s):
    return {
        "shape": shape,
        "variant": variant,
        "step_s": step_s,
        "tokens_per_s": 65536 / step_s,
        "mfu_update": 0.4,
        "mfu_infer": 0.3,
        "device": "NVIDIA H200",
        "tokens": 65536,
    }


def test_summary_table_speedup_is_against_the_baseline_of_the_same_shape_and_dash_without_one():
    from benchmarks.bench_gpu_update import BASELINE, summary_table

    long_variant = "varlen+logits+compile+fusedadam"
    rows = [_row("qwen", BASELINE, 1.0), _row("qwen", long_variant, 0.5), _row("smol", long_variant, 0.25)]
    header, *body, footer = summary_table(rows).splitlines()
    # 1.0 s / 0.5 s on the same shape; smol has no baseline row, so no ratio (session 24 printed "nanx")
    assert body[0].split()[-1] == "1.00x"
    assert body[1].split()[-1] == "2.00x"
    assert body[2].split()[-1] == "-"
    # the longest variant name sets the column, so every row's s/step starts where the header's does
    column = header.index("s/step") + len("s/step")
    assert [line[column - 5 : column] for line in body] == ["1.000", "0.500", "0.250"]
    assert footer.startswith("device: NVIDIA H200; tokens/step 65536")


def test_a_child_killed_after_printing_its_result_keeps_the_result_as_text():
    import json
    import sys

    from benchmarks.bench_gpu_update import child_output

    # session 31: the 0.5B child printed RESULT, hung at exit and was killed; its output came back as b'RESULT ...'
    script = "import time; print('RESULT {\"step_s\": 0.5}', flush=True); time.sleep(60)"
    output = child_output([sys.executable, "-c", script], timeout=3)
    assert output.endswith("TIMEOUT after 3 s")
    first = output.splitlines()[0]
    assert first.startswith("RESULT ")
    assert json.loads(first[len("RESULT ") :]) == {"step_s": 0.5}


def test_a_child_that_exits_gives_its_output_without_a_timeout_line():
    import sys

    from benchmarks.bench_gpu_update import child_output

    output = child_output([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr)"], timeout=30)
    assert output == "out\nerr\n"
