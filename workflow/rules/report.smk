# Reporting: the HTML report (`snakemake --report results/report.html`) and the
# run manifest + one-page summary, rewritten after every successful run.

report: "../report/workflow.rst"


onsuccess:
    from kernbench.report.manifest import write_manifest, write_summary

    write_manifest(SWEEP, "results/manifest.json")
    write_summary(SWEEP, "results/SUMMARY.md")
