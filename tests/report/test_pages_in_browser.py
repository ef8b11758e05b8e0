"""Every report page in a real browser: Debian's headless Chromium, driven by selenium
through Debian's chromedriver, one session for all pages. Each page loads with no console
error, every plot is drawn by plotly with non-empty traces, its legend does not cover the
plot area, its table of contents links resolve, and a screenshot of each plot area holds
coloured pixels of data (not a blank frame with axes)."""

from __future__ import annotations

import io
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from report_fixtures import comparison_document, experiment, short_analysis

from lowtail.analyze.page import write_analysis_report
from lowtail.compare.certificate import certify_and_store
from lowtail.compare.certificate_page import write_certificate
from lowtail.compare.comparison import CompareOptions
from lowtail.compare.page import comparison_page
from lowtail.experiment.page import write_experiment_report
from lowtail.store import open_store

pytestmark = pytest.mark.slow

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
WIDTH = 1400
# Where screenshots of the whole pages go when asked (LOWTAIL_SCREENSHOTS=DIR), to look at.
SCREENSHOTS = os.environ.get("LOWTAIL_SCREENSHOTS")


@pytest.fixture(scope="module")
def browser():
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        pytest.fail("Debian's chromium and chromium-driver are needed (`make deps` installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={WIDTH},1000",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(300)  # a loaded machine parses the 4.8 MB bundle slowly
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """The three kinds of page, written from stored data and a comparison document."""
    tmp = tmp_path_factory.mktemp("pages")
    db, aid = short_analysis(tmp)
    analysis = write_analysis_report(db, aid, tmp / "analysis.html")
    edb, eid = experiment(tmp)
    experiment_page = write_experiment_report(edb, eid, tmp / "experiment.html")
    compare = comparison_page(*comparison_document()).write(tmp / "compare.html")
    with open_store(edb) as store:
        record = certify_and_store(store, [str(eid)], CompareOptions())
    certificate = write_certificate(record, tmp / "certificate.html")
    explain_page, explained_experiment = _explained(tmp)
    return {
        "analysis": analysis,
        "experiment": experiment_page,
        "compare": compare,
        "certificate": certificate,
        "record": record,
        "explain": explain_page,
        "explained_experiment": explained_experiment,
    }


def _explained(tmp: Path) -> tuple[Path, Path]:
    """`lowtail explain RUN -o explain.html` of a run whose trace shows a task preempting the
    DuT, and its experiment's page (which shows the same stored explanation as a section)."""
    import subprocess
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "compare"))
    from compare_support import experiment as stored_experiment
    from compare_support import store_run, trace_and_explain

    db = tmp / "explained.duckdb"
    with open_store(db) as store:
        eid = stored_experiment(store, "explained", {"percentile": 99.9, "budget": "30us"})
        run = store_run(store, tmp, eid, "fwd", seed=4, spike_probability=0.003, spike_ns=40_000)
        trace_and_explain(store, run, tmp)
    page = tmp / "explain.html"
    done = subprocess.run(
        [sys.executable, "-m", "lowtail", "explain", str(run), "-o", str(page), "--db", str(db)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert f"page: {page}" in done.stderr + done.stdout
    return page, write_experiment_report(db, eid, tmp / "explained-experiment.html")


# Per plot: its traces with points, whether plotly drew it, and the rectangles of its plot
# area(s) and legend.
_PLOTS_JS = """
return Array.from(document.querySelectorAll('.lt-plot-area')).map(function (div) {
  var rect = function (e) { var r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  return {
    id: div.id,
    drawn: !!div._fullLayout && !!div.querySelector('.main-svg'),
    traces: (div.data || []).filter(function (t) {
      return (t.x && t.x.length > 0) || (t.y && t.y.length > 0); }).length,
    areas: Array.from(div.querySelectorAll('.nsewdrag')).map(rect),
    legend: div.querySelector('.legend') ? rect(div.querySelector('.legend')) : null,
    title: (div._fullLayout && div._fullLayout.title && div._fullLayout.title.text) || div.id
  };
});
"""


def _wait_drawn(driver, timeout: float = 180.0) -> list[dict]:
    """The page's plots once every one is drawn: at once for a loaded page without plots (the
    certificate and explain pages waited out the whole timeout, three minutes each)."""
    deadline = time.monotonic() + timeout
    while True:
        loaded = driver.execute_script("return document.readyState") == "complete"
        plots = driver.execute_script(_PLOTS_JS)
        if loaded and all(p["drawn"] for p in plots) or time.monotonic() > deadline:
            return plots
        time.sleep(0.2)


def _overlap(a, b) -> bool:
    return a[0] < b[2] - 1 and b[0] < a[2] - 1 and a[1] < b[3] - 1 and b[1] < a[3] - 1


def _coloured_pixels(png: bytes) -> int:
    """Pixels of saturated colour (data: every series has a colour; axes and grid are grey)."""
    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    spread = rgb.max(axis=2) - rgb.min(axis=2)
    return int((spread > 60).sum())


def _check_page(driver, path: Path, expected_plots: int) -> None:
    driver.get_log("browser")  # drop what earlier pages left
    driver.get(path.as_uri())
    plots = _wait_drawn(driver)
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], f"{path.name}: console errors {errors}"
    assert len(plots) >= expected_plots, f"{path.name}: {len(plots)} plots"
    for p in plots:
        assert p["drawn"], f"{path.name}: {p['title']} was not drawn"
        assert p["traces"] > 0, f"{path.name}: {p['title']} has no trace with points"
        assert p["areas"], f"{path.name}: {p['title']} has no plot area"
        if p["legend"]:
            covered = [a for a in p["areas"] if _overlap(p["legend"], a)]
            assert not covered, f"{path.name}: the legend of {p['title']} covers its plot area"
    links = driver.execute_script(
        "return Array.from(document.querySelectorAll('nav.toc a')).map(a => a.getAttribute('href').slice(1))"
    )
    assert links, f"{path.name}: no table of contents"
    missing = [i for i in links if not driver.execute_script("return !!document.getElementById(arguments[0])", i)]
    assert missing == [], f"{path.name}: contents link to missing sections {missing}"
    for p in plots:
        element = driver.find_element("id", p["id"])
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
        area = element.find_element("css selector", ".nsewdrag")
        assert _coloured_pixels(area.screenshot_as_png) > 40, f"{path.name}: the plot area of {p['title']} is blank"
    if SCREENSHOTS:
        _full_screenshot(driver, Path(SCREENSHOTS) / f"{path.stem}.png")


def _full_screenshot(driver, target: Path) -> None:
    """The whole page as one PNG (the window stretched to its height), to look at."""
    driver.execute_script("window.scrollTo(0, 0)")
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(WIDTH, min(height + 100, 16_000))
    target.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(target))
    driver.set_window_size(WIDTH, 1000)


def test_pages_load_draw_and_show_data(browser, pages):
    """All pages in one browser session (starting Chromium is the slow part)."""
    _check_page(browser, pages["analysis"], expected_plots=6)
    _check_page(browser, pages["experiment"], expected_plots=10)
    _check_page(browser, pages["compare"], expected_plots=4)


@pytest.mark.parametrize(
    "page, table, verdict_cells",
    [("experiment", ".lt-runs", "td.verdict, td.why"), ("compare", ".lt-configs", "td.text:last-child")],
)
def test_the_verdict_table_fits_1400_px(browser, pages, page, table, verdict_cells):
    """The experiment's runs table and the comparison's Table II at 1400 px: no column
    scrolled out of sight, every verdict (and its reason) inside the window."""
    browser.get(pages[page].as_uri())
    scroll, width = browser.execute_script(
        "var t = document.querySelector(arguments[0]), d = t.parentElement;"
        "return [Math.max(d.scrollWidth, t.scrollWidth), d.clientWidth]",
        table,
    )
    assert scroll <= width, f"{page}: {table} is {scroll} px wide in {width} px"
    cells = ", ".join(f"{table} {c.strip()}" for c in verdict_cells.split(","))
    right = browser.execute_script(
        "return Math.max(...Array.from(document.querySelectorAll(arguments[0]))"
        ".map(td => td.getBoundingClientRect().right))",
        cells,
    )
    assert 0 < right <= WIDTH


def test_the_reason_of_each_verdict_is_whole_inside_the_window(browser, pages):
    """The experiment's reasons on rows of their own, wrapped to the window at any width,
    the table scrolled or not. Before: a "why" column right of the figures, pushed out of
    sight behind the table's scroll bar below 1,250 px."""
    browser.get(pages["experiment"].as_uri())
    try:
        for width in (WIDTH, 900):
            browser.set_window_size(width, 1000)
            inner, reasons = browser.execute_script(
                "return [window.innerWidth, Array.from(document.querySelectorAll('.lt-runs td.why > div'))"
                ".map(d => [d.getBoundingClientRect().left, d.getBoundingClientRect().right,"
                " d.scrollWidth <= d.clientWidth, d.textContent])]"
            )
            assert reasons, "no reason shown"
            for left, right, whole, text in reasons:
                assert 0 <= left and right <= inner and whole, (width, left, right, text)
                assert text.startswith("why: ") and not text.endswith("…")
    finally:
        browser.set_window_size(WIDTH, 1000)


def test_a_short_analysis_shows_its_packet_rate(browser, pages):
    """0.4 s of traffic at 10 kpps: one partial second, drawn as a 10 kpps bar."""
    browser.get(pages["analysis"].as_uri())
    _wait_drawn(browser)
    bars = browser.execute_script(
        "var d = Array.from(document.querySelectorAll('.lt-plot-area'))"
        ".find(d => d._fullLayout.title.text === 'Packets per second');"
        "return d.data.map(t => Array.from(t.y));"
    )
    assert bars and all(len(b) == 1 for b in bars)
    assert all(9_000 < b[0] < 11_000 for b in bars)  # packets over the part of the second covered


@pytest.mark.parametrize("page", ["analysis", "experiment", "compare", "certificate", "explain"])
def test_the_first_screen_holds_the_verdicts(browser, pages, page, tmp_path):
    """A laptop's first screen (1366 × 768) of each page holds its verdict cards, whole,
    before any banner, the contents or a section (the experiment page opened with a wall of
    degraded-run text, the comparison's cards came after the contents)."""
    browser.set_window_size(1366, 768)
    try:
        chrome = 768 - browser.execute_script("return window.innerHeight")  # the window's own bars
        browser.set_window_size(1366, 768 + chrome)
        browser.get(pages[page].as_uri())
        _wait_drawn(browser)  # the page laid out whole, its plots too
        viewport = browser.execute_script("return window.innerHeight")
        assert viewport == 768
        cards = browser.execute_script(
            "return Array.from(document.querySelectorAll('.lt-card')).map(c => {"
            " var r = c.getBoundingClientRect();"
            " return [r.top, r.bottom, c.querySelector('.status').textContent]; })"
        )
        assert cards, f"{page}: no verdict card"
        assert all(0 <= top and bottom <= viewport for top, bottom, _ in cards), (page, viewport, cards)
        assert {status for _, _, status in cards} <= {"PASS", "FAIL", "inconclusive", "INVALID"}
        first_other = browser.execute_script(
            "var e = document.querySelector('.banner, nav.toc, h2'); return e ? e.getBoundingClientRect().top : 1e9"
        )
        assert max(bottom for _, bottom, _ in cards) <= first_other
        shots = Path(SCREENSHOTS or tmp_path)
        shots.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(shots / f"{page}-first-screen.png"))
    finally:
        browser.set_window_size(WIDTH, 1000)


def test_the_qualification_record_reads_in_the_browser(browser, pages):
    """`lowtail certify`'s page: no console error, its contents resolve, it fits 1400 px,
    and each card shows the verdict of its device as the record states it (its status: PASS
    only if every configuration of the device passes, FAIL if any fails)."""
    browser.get_log("browser")
    browser.get(pages["certificate"].as_uri())
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors
    links = browser.execute_script(
        "return Array.from(document.querySelectorAll('nav.toc a')).map(a => a.getAttribute('href').slice(1))"
    )
    assert links and all(browser.execute_script("return !!document.getElementById(arguments[0])", i) for i in links)
    assert browser.execute_script("return document.documentElement.scrollWidth") <= WIDTH
    cards = browser.execute_script(
        "return Array.from(document.querySelectorAll('.lt-card')).map(c => "
        "[c.querySelector('.name').innerText, c.querySelector('.status').innerText])"
    )
    expected = [[f"{d['device']} ({d['kind']})", d["status"]] for d in pages["record"]["devices"]]
    assert [[n.strip(), s.strip()] for n, s in cards] == expected
    if SCREENSHOTS:
        _full_screenshot(browser, Path(SCREENSHOTS) / "certificate.png")


@pytest.fixture(scope="module")
def one_configuration(tmp_path_factory):
    """`lowtail compare … -o page.html` of one configuration, its DuT named with plotly markup
    (an imported run's name: import-captures and bundles carry any name)."""
    import subprocess
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "compare"))
    from compare_support import experiment as stored_experiment
    from compare_support import store_run

    from lowtail.store import open_store

    tmp = tmp_path_factory.mktemp("one")
    db = tmp / "one.duckdb"
    with open_store(db) as store:
        eid = stored_experiment(store, "one")
        for rep in range(2):
            store_run(store, tmp, eid, "<b>fw</b>", repetition=rep, seed=rep + 1)
    page = tmp / "cmp.html"
    done = subprocess.run(
        [sys.executable, "-m", "lowtail", "compare", "1", "--budget", "350us", "-o", str(page), "--db", str(db)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr  # before: exit 70, "must first use make_subplots"
    return page


def test_a_comparison_of_one_configuration_is_drawn_and_names_are_text(browser, one_configuration):
    """Before: `compare … -o page.html` of one configuration was exit 70 (the README's own
    example), and a DuT name drew as plotly markup (bold) in titles and legends."""
    _check_page(browser, one_configuration, expected_plots=3)
    shown = browser.execute_script(
        "return Array.from(document.querySelectorAll('.lt-plot-area svg text')).map(t => t.textContent).join('|')"
    )
    assert "<b>fw</b>" in shown, shown[:500]
    bold = browser.execute_script(
        "return Array.from(document.querySelectorAll('.lt-plot-area svg text tspan'))"
        ".filter(t => (t.getAttribute('style') || '').includes('bold')).length"
    )
    assert bold == 0


def _section(html: str, heading: str) -> str:
    """A section's body: from its heading to the next section's."""
    start = html.index(f">{heading}</h")
    body = html[html.index(">", start + len(heading) + 2) + 1 :]
    ends = [i for i in (body.find("<h2"), body.find("<h3"), body.find("<script"), body.find("</body>")) if i >= 0]
    return body[: min(ends)]


def test_explain_has_a_page_of_its_own(browser, pages):
    """`lowtail explain RUN -o FILE`: the run's verdict card and the answer in a line first,
    then the same stored explanation the experiment's page shows for the run."""
    browser.get_log("browser")
    browser.get(pages["explain"].as_uri())
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors
    lead = browser.execute_script("return Array.from(document.querySelectorAll('p.lt-lead')).pop().innerText")
    assert lead.startswith("another task preempted the DuT: hog") and "Remedy: " in lead, lead
    assert browser.execute_script("return document.documentElement.scrollWidth") <= WIDTH
    html, experiment_html = pages["explain"].read_text(), pages["explained_experiment"].read_text()
    own = _section(html, "Causes of the tail")
    assert "<table>" in own and "hog" in own
    assert own == _section(experiment_html, "Run 1: causes of the tail")
    # The remedy reads as prose: left-aligned, where the figures beside it are right-aligned.
    align = browser.execute_script(
        "var rows = Array.from(document.querySelectorAll('table')).filter(t => t.innerText.includes('remedy'))"
        "[0].querySelectorAll('tbody tr');"
        "return [getComputedStyle(rows[0].cells[7]).textAlign, getComputedStyle(rows[0].cells[4]).textAlign]"
    )
    assert align == ["left", "right"], align


def test_the_tune_page_overlays_before_and_after_and_says_what_was_kept(browser, tmp_path):
    """`lowtail tune -o`: the changes with their cause, effect and result, the before/after HDR
    overlay (the stored comparison's curves) and the boot-time parameters with the GRUB line."""
    from lowtail.tune.page import tune_page

    comparison, drawn = comparison_document()
    comparison["host_state_differences"] = [
        {"a_index": 0, "b_index": 1, "settings": {"CPU 1 real-time tasks": ["lowtail-hog:60", "none"]}}
    ]
    change = {
        "id": "move-pid-4121", "setting": "CPUs of lowtail-hog (pid 4121, thread 4121)",
        "cause": "preemption on CPU 1: lowtail-hog (pid 4121, real-time priority 60), 60 % of the tail",
        "remedy": {"id": "move-tasks-off-dut-cores", "action": "move the tasks", "boot_parameters": ["isolcpus"],
                   "source": "JNSM 2023, Table 1"},
        "applied": ["CPUs of lowtail-hog: 1 → 0"], "effect": "experiment 2 is lower than experiment 1 at p99.9",
        "improved": True, "harmed": [], "kept": True, "after": 2, "comparison_id": 1,
        "undo_file": "/root/lowtail-tune-1-1.undo.json",
    }  # fmt: skip
    useless = change | {"id": "vm.stat_interval", "setting": "vm.stat_interval", "kept": False, "improved": False,
                        "effect": "not called", "undo_file": None}  # fmt: skip
    doc = {
        "tune_id": 1, "spec": "fwd.toml", "before": 1, "after": 2, "comparison_id": 1, "percentile": "p99_9",
        "changes": [change, useless], "kept": ["move-pid-4121"], "undone": ["vm.stat_interval"],
        "boot": {"params": [{"name": "isolcpus", "text": "isolcpus=1", "purpose": "keep other tasks off",
                             "source": "JNSM 2023, Table 1", "causes": ["preemption on CPU 1"]}],
                 "grub": 'GRUB_CMDLINE_LINUX_DEFAULT="quiet isolcpus=1"', "grub_steps": ["update-grub"], "notes": []},
        "dry_run": False, "status": "finished", "after_reboot": [],
    }  # fmt: skip
    path = tune_page(doc, comparison, drawn).write(tmp_path / "tune.html")
    _check_page(browser, path, expected_plots=1)
    text = browser.find_element("tag name", "body").text
    assert "kept" in text and "undone" in text and "GRUB_CMDLINE_LINUX_DEFAULT" in text
    assert "lowtail host undo /root/lowtail-tune-1-1.undo.json" in text
    assert "Host state" in text and "lowtail-hog:60" in text  # where before and after's fingerprints differ
    # A before whose repetitions do not bound the judged percentile: the page says so first.
    why = "the p99.9 is not bounded by the packets of runs 1, 2 of experiment 1: … lengthen `duration`"
    unresolved = doc | {"resolution": {"percentile": "p99_9", "bounded": False, "unbounded_runs": [1, 2],
                                       "packets_needed": 677411, "seconds_needed": 68, "why": why}}  # fmt: skip
    path = tune_page(unresolved, comparison, drawn).write(tmp_path / "unresolved.html")
    _check_page(browser, path, expected_plots=1)
    banner = browser.find_element("css selector", ".banner.warn").text
    assert "cannot resolve what tune judges" in banner and "lengthen `duration`" in banner
