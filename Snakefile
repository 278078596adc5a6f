# KernBench workflow: `snakemake --cores N` regenerates every record, table,
# figure and the paper from config/config.yaml (or --configfile config/smoke.yaml).
from snakemake.utils import min_version

min_version("8.0")


# A --configfile on the command line replaces this default instead of being
# merged into it, so config/smoke.yaml runs exactly what it says.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/simulate.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/paper.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/site.smk"


rule all:
    default_target: True
    input:
        rules.paper.output.pdf,
        rules.site.output.index,
        TABLES,
        SENSITIVITY,
        FIGURES,
