"""Reading whether the CPU multiplies bf16 natively from ``/proc/cpuinfo``-shaped text (x86 and Arm examples)."""

from verl.utils.device import cpu_multiplies_bf16


def test_native_bf16_is_read_from_the_flags_line(tmp_path):
    cases = {
        "processor\t: 0\nflags\t\t: fpu sse avx2 avx512f\n": False,  # an AVX2/AVX512 CPU without bf16 (emulated)
        "processor\t: 0\nflags\t\t: avx2 avx512f avx512_bf16\n": True,
        "processor\t: 0\nflags\t\t: avx2 amx_bf16 amx_tile\n": True,
        "processor\t: 0\nFeatures\t: fp asimd bf16 i8mm\n": True,  # Arm
        "processor\t: 0\nFeatures\t: fp asimd\n": False,
        "processor\t: 0\n": None,  # no flags line
    }
    for index, (text, expected) in enumerate(cases.items()):
        path = tmp_path / f"cpuinfo{index}"
        path.write_text(text)
        assert cpu_multiplies_bf16(path) is expected, text
    assert cpu_multiplies_bf16(tmp_path / "missing") is None
