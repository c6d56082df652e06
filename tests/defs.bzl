"""One cc_test per *_test.cpp file in a tests/ folder."""

def loom_tests(deps = [], tags = {}, size = "small", shard_count = {}, file_deps = {}, file_data = {}):
    """Declares a cc_test for every *_test.cpp here.

    tags: file name -> extra tags (e.g. {"cuda_test.cpp": ["gpu"]}).
    file_deps: file name -> extra deps of that test only (e.g. cuDNN).
    file_data: file name -> runtime files of that test only (e.g. the
      PyTorch reference scripts, ["//tools/pyloom"]).
    """
    for src in native.glob(["*_test.cpp"]):
        name = src[:-len(".cpp")]
        native.cc_test(
            name = name,
            srcs = [src],
            size = size,
            linkstatic = True,
            # Other tests may run a test binary (tests/tools:gpu_run_dry_test).
            visibility = ["//tests:__subpackages__"],
            tags = tags.get(src, []),
            shard_count = shard_count.get(src, None),
            data = file_data.get(src, []),
            deps = deps + file_deps.get(src, []) + [
                "//:loom",
                "//tests:test_util",
                "@gtest//:gtest_main",
            ],
        )
