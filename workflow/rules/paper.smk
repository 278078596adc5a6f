# Tables + topology -> report/generated/ (LaTeX tables and values), then the PDF.

GENERATED = ["report/generated/values.tex", "report/generated/hardware_table.tex"] + [
    f"report/generated/{experiment}_table.tex" for experiment in EXPERIMENTS
]


rule report_generated:
    input:
        tables=TABLES,
        topologies=sorted({src for job in SWEEP.jobs for src in job.topology_sources}
                          | set(config["topologies"].values())),
    output:
        GENERATED,
    params:
        report=lambda w: config["report"],
        topologies=config["topologies"],
    log:
        "results/logs/report_generated.log",
    benchmark:
        "results/benchmarks/report_generated.tsv"
    resources:
        mem_mb=1000,
        runtime=10,
    conda:
        CONDA_ENV
    script:
        "../scripts/report_generated.py"


rule paper:
    input:
        generated=GENERATED,
        figures=[f for f in FIGURES if f.endswith(".pdf")],
        sources=["report/paper.tex", "report/references.bib"]
        + sorted(str(p) for p in Path("report/sections").glob("*.tex")),
    output:
        pdf=report("report/build/paper.pdf", caption="../report/paper.rst", category="Paper"),
    params:
        engine=config["report"]["engine"],
    log:
        "results/logs/paper.log",
    benchmark:
        "results/benchmarks/paper.tsv"
    resources:
        mem_mb=2000,
        runtime=20,
    conda:
        CONDA_ENV
    script:
        "../scripts/paper.py"
