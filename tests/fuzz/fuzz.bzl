"""pstrain_fuzz_test: a fuzz target that runs as a test in both builds.

    pstrain_fuzz_test(
        name = "csv_fuzzer",          # csv_fuzzer.cc defines LLVMFuzzerTestOneInput
        deps = ["//data:csv_reader"],
        dict = "csv.dict",            # optional libFuzzer dictionary
    )

makes the cc_test `csv_fuzzer` from csv_fuzzer.cc, with the seed corpus
corpus/csv/ (the name less "_fuzzer") as data and argument:
  - default build (g++): linked with fuzz_main.cc's standalone driver, it
    replays the corpus, then runs `mutations` deterministic random mutations;
  - --config=fuzz (clang): linked with libFuzzer, it fuzzes from the corpus
    for `seconds` seconds under AddressSanitizer and UBSan, failing on any
    crash, leak, sanitizer report, input slower than 10 s, or allocation
    over 2 GiB.
"""

def pstrain_fuzz_test(name, deps = [], dict = None, mutations = 1000, seconds = 20):
    if not name.endswith("_fuzzer"):
        fail("a fuzz target's name ends with _fuzzer: " + name)
    base = name[:-len("_fuzzer")]
    corpus = "corpus/" + base
    data = native.glob([corpus + "/**"])
    if not data:
        fail("%s: no seed corpus in %s/" % (name, corpus))
    corpus_arg = native.package_name() + "/" + corpus
    dict_args = []
    if dict:
        data = data + [dict]
        dict_args = ["-dict=$(rootpath %s)" % dict]
    native.cc_test(
        name = name,
        # Medium: the libFuzzer run takes `seconds` plus start-up, above a
        # small test's 60 s limit on a busy machine.
        size = "medium",
        srcs = [name + ".cc"],
        data = data,
        args = select({
            "//tests/fuzz:libfuzzer": [
                "-max_total_time=%d" % seconds,
                "-timeout=10",
                "-rss_limit_mb=2048",
                "-malloc_limit_mb=2048",
                "-print_final_stats=1",
                "-print_funcs=0",
            ],
            "//conditions:default": ["-runs=%d" % mutations],
        }) + dict_args + [corpus_arg],
        linkopts = select({
            "//tests/fuzz:libfuzzer": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        tags = ["fuzz"],
        deps = deps + [
            "//tests/fuzz:fuzz_main",
            "//tests/fuzz:fuzz_util",
        ],
    )
