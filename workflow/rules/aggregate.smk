# Records -> one tidy CSV per experiment (the experiment's own `frame`).


rule aggregate:
    input:
        lambda w: SWEEP.table_inputs(w.experiment),
    output:
        report(
            f"{TABLE_DIR}/{{experiment}}.csv",
            caption="../report/table.rst",
            category="Tables",
        ),
    params:
        plugins=PLUGINS,
        settings=lambda w: SWEEP.post_settings(w.experiment),
    log:
        f"{LOG_DIR}/aggregate/{{experiment}}.log",
    benchmark:
        f"{BENCH_DIR}/aggregate/{{experiment}}.tsv"
    resources:
        mem_mb=1000,
        runtime=10,
    conda:
        CONDA_ENV
    script:
        "../scripts/aggregate.py"


rule sensitivity:
    input:
        SWEEP.sensitivity_outputs(),
    output:
        report(
            f"{TABLE_DIR}/sensitivity.csv",
            caption="../report/table.rst",
            category="Tables",
        ),
    log:
        f"{LOG_DIR}/aggregate/sensitivity.log",
    benchmark:
        f"{BENCH_DIR}/aggregate/sensitivity.tsv"
    resources:
        mem_mb=1000,
        runtime=10,
    conda:
        CONDA_ENV
    script:
        "../scripts/sensitivity.py"
