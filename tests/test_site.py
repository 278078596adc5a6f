"""The results site in headless Chromium: the planner on the page shows what
``kernbench capacity --json`` computes for the same inputs, served by
``kernbench web`` and opened from disk. Needs Debian's chromium and
chromium-driver (``scripts/setup --browser``, which ``scripts/tests`` runs)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernbench.capacity.planner import Chip, Efficiency, fmt
from kernbench.report.site import build, planner_data

from .conftest import ROOT

TABLE = ("kind,sweep,users,context,efficiency,C,variant,topology\n"
         "decode,sweep,1,8192,0.5,1,opt3,llama70b_4sip\n"
         "decode,sweep,1,16384,0.7,1,opt3,llama70b_4sip\n"
         "decode,sweep,1,32768,0.8,1,opt3,llama70b_4sip\n")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    d = tmp_path_factory.mktemp("site")
    table = d / "gqa.csv"
    table.write_text(TABLE)
    chips = [Chip.from_topology(n) for n in ("default", "llama70b_4sip")]
    build(d / "site", "KernBench test site", {"gqa": ["a headline line"]}, [],
          planner_data(chips, Efficiency.from_table(table)))
    return d / "site", table


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    assert binary and driver, "headless Chromium is missing: run scripts/setup --browser"
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--window-size=1200,1600"):
        opts.add_argument(arg)
    b = webdriver.Chrome(service=Service(driver), options=opts)
    yield b
    b.quit()


@pytest.fixture(scope="module")
def served(site):
    proc = subprocess.Popen([sys.executable, "-m", "kernbench.cli.main", "web", "--port", "0",
                             "--dir", str(site[0])], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert "127.0.0.1:" in line, line
    yield line.split("http://")[1].split()[0]
    proc.terminate()
    proc.wait(timeout=10)


def _cli(table, model, chip, context, users, tpot):
    out = subprocess.run([sys.executable, "-m", "kernbench.cli.main", "capacity", "--model",
                          model, "--topology", chip, "--context", str(context), "--users",
                          str(users), "--tpot-ms", str(tpot), "--table", str(table), "--json"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def _shown(b) -> dict:
    rows = b.find_elements("css selector", "#axes tr[id^='ax-']")
    return {r.get_attribute("id")[3:]: [td.text for td in r.find_elements("tag name", "td")]
            for r in rows}


def _check(b, table, model, chip):
    from selenium.webdriver.support.ui import Select

    assert Select(b.find_element("id", "model")).first_selected_option.text == model
    assert Select(b.find_element("id", "chip")).first_selected_option.text == chip
    ctx = int(b.find_element("id", "context_v").text)
    users = int(b.find_element("id", "users_v").text)
    tpot = float(b.find_element("id", "tpot_v").text)
    doc = _cli(table, model, chip, ctx, users, tpot)
    shown = _shown(b)
    steps = {s["name"]: s for axis in doc["axes"].values() for s in axis["steps"]}
    assert set(shown) == set(steps)
    for name, s in steps.items():
        assert shown[name][3] == f"{fmt(s['value'])} {s['unit']}", name
        assert shown[name][2] == s["substituted"], name
    assert doc["efficiency"]["source"] in b.find_element("id", "effsource").text
    return doc


def test_page_from_kernbench_web_matches_the_cli(browser, served, site):
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    browser.get(f"http://{served}")
    Select(browser.find_element("id", "chip")).select_by_value("default")
    Select(browser.find_element("id", "model")).select_by_value("llama3-8b")
    _check(browser, site[1], "llama3-8b", "default")
    Select(browser.find_element("id", "model")).select_by_value("llama3-70b")
    slider = browser.find_element("id", "context")
    for _ in range(5):  # 5 steps of 1024 tokens: between measured points (interpolated)
        slider.send_keys(Keys.ARROW_RIGHT)
    assert browser.find_element("id", "context_v").text == str(8192 + 5 * 1024)
    doc = _check(browser, site[1], "llama3-70b", "default")
    assert doc["values"]["pes"] == 22 and "interpolated" in doc["efficiency"]["source"]
    legend = browser.find_element("id", "sym-kv_heads").find_elements("tag name", "td")
    assert [td.text for td in legend] == ["kv_heads", "KV heads", "8"]
    out = ROOT / "results" / "site"
    out.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(out / "planner_screenshot.png"))


def test_page_opened_from_disk_works(browser, site):
    from selenium.webdriver.support.ui import Select

    browser.get(Path(site[0], "index.html").as_uri())
    Select(browser.find_element("id", "model")).select_by_value("llama3-8b")
    doc = _check(browser, site[1], "llama3-8b", "default")
    assert doc["values"]["pes"] == 3
    assert browser.find_element("id", "error").text == ""


STEPS = ("model,topology,phase,batch,context,fits,setting,step_ns\n"
         "llama3-8b,default,decode,1,8192,True,default,30000000\n"
         "llama3-8b,default,decode,8,8192,True,default,40000000\n"
         "llama3-8b,default,decode,1,16384,True,default,60000000\n"
         "llama3-8b,default,decode,8,16384,True,default,80000000\n"
         "llama3-8b,default,decode,8,16384,True,sip-link-bw-x2,1\n"  # a what-if: not used
         "llama3-8b,default,prefill,1,128,True,default,9\n")  # prefill: not a decode step


@pytest.fixture(scope="module")
def steps_site(tmp_path_factory):
    """A site built with the llm study's steps, and a folder where `kernbench capacity`
    finds the same table as results/tables/llm.csv."""
    from kernbench.capacity.steps import site_grids

    d = tmp_path_factory.mktemp("steps")
    (d / "results" / "tables").mkdir(parents=True)
    llm = d / "results" / "tables" / "llm.csv"
    llm.write_text(STEPS)
    gqa = d / "gqa.csv"
    gqa.write_text(TABLE)
    chips = [Chip.from_topology(ROOT / "config/topologies/default.yaml")]
    with pytest.MonkeyPatch.context() as mp:  # the table named as the workflow names it
        mp.chdir(d)
        grids = site_grids(Path("results/tables/llm.csv"))
    build(d / "site", "steps site", {}, [],
          planner_data(chips, Efficiency.from_table(gqa), grids))
    return d


def _simulated_cli(folder, context, users, tpot):
    out = subprocess.run([sys.executable, "-m", "kernbench.cli.main", "capacity", "--model",
                          "llama3-8b", "--topology", str(ROOT / "config/topologies/default.yaml"),
                          "--context", str(context), "--users", str(users), "--tpot-ms",
                          str(tpot), "--table", str(folder / "gqa.csv"), "--json"],
                         capture_output=True, text=True, check=True, cwd=folder)
    return json.loads(out.stdout)["axes"]["C"]


def _set_tpot(browser, ms: float) -> None:
    from selenium.webdriver.common.keys import Keys

    slider = browser.find_element("id", "tpot")
    while float(browser.find_element("id", "tpot_v").text) != ms:
        now = float(browser.find_element("id", "tpot_v").text)
        slider.send_keys(Keys.ARROW_RIGHT if now < ms else Keys.ARROW_LEFT)


def test_axis_c_from_simulated_steps_matches_the_cli(browser, steps_site):
    """At 13312 tokens (between the simulated 8K and 16K) a step of one user takes
    48.75 ms and of eight 65 ms: 50 ms serves one user per system, 100 ms eight, and
    45 ms none, each as ``kernbench capacity`` says from the same table."""
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    browser.get(Path(steps_site, "site", "index.html").as_uri())
    Select(browser.find_element("id", "model")).select_by_value("llama3-8b")
    slider = browser.find_element("id", "context")
    for _ in range(5):
        slider.send_keys(Keys.ARROW_RIGHT)
    ctx = int(browser.find_element("id", "context_v").text)
    users = int(browser.find_element("id", "users_v").text)
    assert ctx == 13312
    for ms, batch in ((50, 1), (100, 8)):
        _set_tpot(browser, ms)
        axis = _simulated_cli(steps_site, ctx, users, ms)
        assert axis["title"] == "latency (simulated steps)"
        rows = browser.find_elements("css selector", "#simaxis tr[id^='sim-']")
        shown = {r.get_attribute("id")[4:]: [td.text for td in r.find_elements("tag name", "td")]
                 for r in rows}
        assert set(shown) == {s["name"] for s in axis["steps"]} == {"batch", "t_step", "systems"}
        for s in axis["steps"]:
            assert shown[s["name"]] == [s["formula"], s["meaning"], s["substituted"],
                                        f"{fmt(s['value'])} {s['unit']}"], s["name"]
        assert axis["steps"][0]["value"] == batch
    _set_tpot(browser, 45)
    axis = _simulated_cli(steps_site, ctx, users, 45)
    assert browser.find_element("id", "simsource").text == f"unavailable: {axis['unavailable']}"
    assert not browser.find_elements("css selector", "#simaxis tr[id^='sim-']")
