# Tables -> figures (PDF for the paper, PNG for the HTML report): one rule per
# experiment, figures_<experiment>, so a study's figures are drawn as soon as its
# own table exists (and can be asked for alone: `kernbench run --bench ...`).


def experiment_figures(exp):
    return [f"{FIGURE_DIR}/{stem}.{ext}" for stem in exp.figures for ext in ("pdf", "png")]


for _exp in EXPS:

    rule:
        name:
            f"figures_{_exp.name}"
        localrule: True
        input:
            table=f"{TABLE_DIR}/{_exp.name}.csv",
            code=sorted(_exp.files),
        output:
            [
                report(f, caption=figure_caption(f), category="Figures")
                if f.endswith(".png")
                else f
                for f in experiment_figures(_exp)
            ],
        params:
            plugins=PLUGINS,
            out_dir=lambda w, output: str(Path(output[0]).parent),
        log:
            f"{LOG_DIR}/figures/{_exp.name}.log",
        benchmark:
            f"{BENCH_DIR}/figures/{_exp.name}.tsv"
        resources:
            mem_mb=1500,
            runtime=10,
        conda:
            CONDA_ENV
        script:
            "../scripts/figures.py"
