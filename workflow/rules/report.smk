# Reporting: the run manifest + one-page summary, rewritten after every successful
# run, and the HTML report (`snakemake --report results/report.html`) after a
# successful run that leaves every default target in place.

report: "../report/workflow.rst"


onsuccess:
    from kernbench.report.manifest import manifest, write_manifest
    from kernbench.report.summary import summary_markdown, write_summary

    _stages = [("aggregate", t, f"{BENCH_DIR}/aggregate/{Path(t).stem}.tsv") for t in TABLES]
    _stages += [(f"figures_{e}", f"{FIGURE_DIR} ({e})", f"{BENCH_DIR}/figures/{e}.tsv")
                for e in EXPERIMENTS]
    _stages += [("report_generated", GENERATED_DIR, f"{BENCH_DIR}/report_generated.tsv"),
                ("paper", PAPER, f"{BENCH_DIR}/paper.tsv")]
    _doc = manifest(SWEEP, RAW, BENCH_DIR, LOG_DIR, _stages)
    write_manifest(_doc, f"{RESULTS}/manifest.json")
    _tables = {e: f"{TABLE_DIR}/{e}.csv" for e in EXPERIMENTS}
    write_summary(summary_markdown(SWEEP, _doc, _tables, CONFIG), f"{RESULTS}/SUMMARY.md")
    # The report is rebuilt from the same config files; --config overrides it cannot
    # repeat, so such a run leaves the report to `snakemake --report` with them.
    if (all(Path(f).exists() for f in rules.all.input)
            and not workflow.config_settings.config):
        _cfg = " ".join(f"--configfile {f}" for f in workflow.overwrite_configfiles or [])
        shell(f"{sys.executable} -m snakemake {_cfg} --report {RESULTS}/report.html "
              f"> {LOG_DIR}/report_html.log 2>&1")
        sys.stderr.write(f"kernbench: HTML report {RESULTS}/report.html "
                         f"(log {LOG_DIR}/report_html.log)\n")
