"""``memread explore`` (issue 60): the view built from ``predict(..., attention=True)`` for each reader family,
the 127.0.0.1 server (other origins refused, size limits), the self-contained ``--html`` file, and the page
itself in headless Chromium (Selenium): it loads with no console error, shows the reader's real numbers for
typed text, steps, and answers bad input with a message. The browser tests skip, saying why, where no
browser (Debian's ``chromium`` + ``chromium-driver``) or no ``selenium`` is installed; ``.ci/run`` installs them."""

from __future__ import annotations

import http.client
import json
import math
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import memread
from memread import cli
from memread.config import experiment_from_dict
from memread.experiment import start_run
from memread.explore.export import write_html
from memread.explore.server import MAX_BODY, serve
from memread.explore.view import MAX_TOKENS, ExploreError, build_view

from test_own_data import make_data

# family -> data format, reader, head, extra [data] keys
FAMILIES = {
    "lstmn": ("text", {"name": "lstmn", "hidden": 6, "layers": 2}, {"name": "lm", "emb": 6}, {"bptt": 5}),
    "window": ("text", {"name": "attention", "hidden": 6, "window": 3}, {"name": "lm", "emb": 6}, {"bptt": 5}),
    "nse": ("jsonl-classify", {"name": "nse", "hidden": 6}, {"name": "mlp", "emb": 6, "mlp": 8}, {}),
    "iaa": ("jsonl-cloze", {"name": "gru", "hidden": 6}, {"name": "iaa", "emb": 6}, {}),
    "as_reader": ("jsonl-cloze", {"name": "gru", "hidden": 6}, {"name": "as_reader", "emb": 6}, {}),
    # the other window language models, and a language model of sentences read alone
    "kv": ("text", {"name": "kv", "hidden": 6, "window": 3}, {"name": "lm", "emb": 6}, {"bptt": 5}),
    "kvp": ("text", {"name": "kvp", "hidden": 6, "window": 3}, {"name": "lm", "emb": 6}, {"bptt": 5}),
    "rm": ("text", {"name": "rm", "hidden": 6, "window": 3}, {"name": "lm", "emb": 6}, {"bptt": 5}),
    "sentence": ("text", {"name": "lstmn", "hidden": 6, "layers": 2}, {"name": "lm", "emb": 6}, {"context": "sentence"}),
    # a deep LSTMN classifier; pairs: MMA-NSE (with attention), the LSTMN fusion decoders
    "lstmn_classify": ("jsonl-classify", {"name": "lstmn", "hidden": 6, "layers": 2},
                       {"name": "mlp", "emb": 6, "mlp": 8}, {}),
    "mma": ("jsonl-pair", {"name": "nse", "hidden": 6}, {"name": "pair", "emb": 6, "mlp": 8, "encoder": "mma_attention"}, {}),
    "deep_fusion": ("jsonl-pair", {"name": "lstmn", "hidden": 6, "layers": 2},
                    {"name": "pair", "emb": 6, "mlp": 8, "encoder": "deep_fusion", "features": "concat", "pool": "mean"}, {}),
    "shallow_fusion": ("jsonl-pair", {"name": "lstmn", "hidden": 6},
                       {"name": "pair", "emb": 6, "mlp": 8, "encoder": "shallow_fusion", "features": "concat"}, {}),
    # the hierarchical document reader, NSE at both levels
    "document": ("jsonl-document", {"name": "nse", "hidden": 6},
                 {"name": "hierarchical", "emb": 6, "doc_reader": "nse", "doc_hidden": 6}, {}),
    # translation: each decoder
    "attention_decoder": ("parallel", {"name": "lstm", "hidden": 6}, {"name": "attention_decoder", "emb": 6, "tgt_emb": 5}, {}),
    "nse_decoder": ("parallel", {"name": "nse", "hidden": 6}, {"name": "nse_decoder", "emb": 6, "tgt_emb": 5}, {}),
    "lstmn_deep": ("parallel", {"name": "lstmn", "hidden": 6, "layers": 2}, {"name": "lstmn_deep", "emb": 6, "tgt_emb": 5}, {}),
    "lstmn_shallow": ("parallel", {"name": "lstmn", "hidden": 6}, {"name": "lstmn_shallow", "emb": 6, "tgt_emb": 5}, {}),
}
LM = ("lstmn", "window", "kv", "kvp", "rm", "sentence")
PAIRS = ("mma", "deep_fusion", "shallow_fusion")
TRANSLATION = ("attention_decoder", "nse_decoder", "lstmn_deep", "lstmn_shallow")
LM_TEXT = "the cat sat on the mat\nthe big dog ran under the red rug\na cat"
CLOZE = {"document": "the cat sat on the mat . the dog ran", "query": "the @blank sat on the mat",
         "candidates": ["cat", "dog"]}
PAIR = {"premise": "the big cat sat on the mat", "hypothesis": "a cat sat"}
DOCUMENT = {"sentences": ["the cat sat on the mat .", "a dog ran .", "the big red rug ."]}
SOURCE = "the big cat sat on a mat"
INPUTS = {**{f: LM_TEXT for f in LM}, "nse": "the big cat sat good", "lstmn_classify": "the big cat sat good",
          "iaa": CLOZE, "as_reader": CLOZE, **{f: PAIR for f in PAIRS}, "document": DOCUMENT,
          **{f: SOURCE for f in TRANSLATION}}


def train_tiny(root: Path, family: str, steps: int = 3) -> Path:
    fmt, reader, head, extra = FAMILIES[family]
    data = {**make_data(root, fmt), **extra}
    cfg = experiment_from_dict({"data": data, "reader": reader, "head": head,
                                "train": {"batch_size": 2, "max_steps": steps, "progress": False, "log_every": 100}},
                               f"{family}.toml")
    with start_run(cfg, root / "run", root) as trainer:
        trainer.fit()
    return root / "run"


class Tiny(dict):
    """Each family's tiny run, trained (a few steps) the first time a test asks for it."""

    def __init__(self, factory):
        super().__init__()
        self.factory = factory

    def __missing__(self, family: str):
        root = self.factory.mktemp(family)
        self[family] = memread.load(train_tiny(root, family), data_root=root)
        return self[family]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return Tiny(tmp_path_factory)


# ----------------------------------------------------------------------------- checks against predict


def close(a, b, tol: float = 1e-5) -> bool:
    """Nested lists of numbers equal within ``tol`` (same shape)."""
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b) and \
            all(close(x, y, tol) for x, y in zip(a, b))
    return abs(float(a) - float(b)) <= tol


def full_row(panel: dict, i: int) -> list[float]:
    """Row ``i`` of a matrix panel over all its columns (as the page's rowWeights builds it)."""
    w = [0.0] * len(panel["cols"])
    first, ws, *empty = panel["cells"][i]
    for j, x in enumerate(ws):
        w[first + j] = x
    if empty:
        w[0] += empty[0]
    return w


def matrix_rows(panel: dict) -> list[list[float]]:
    return [full_row(panel, i) for i in range(len(panel["rows"]))]


def check_lm(panel: dict, result, segments: list | None = None) -> None:
    """A language model's matrix against the per-segment traces of ``predict`` (``segments``: those of one
    layer; default the top's): every row keeps its mass, and each weight on the segment's own tokens sits on
    that token's column. A stream reads every token but the last; sentences read alone, every token but each
    line's <eos>, and a row's weights stay within its own sentence (the empty column 0 aside)."""
    sentences = result.tokens[0] == "<s>"
    tokens = result.tokens
    rows = [r for r, t in enumerate(tokens) if t != "<eos>"] if sentences else list(range(len(tokens) - 1))
    assert panel["rows"] == [tokens[r] for r in rows]
    assert panel["cols"][1:] == tokens and panel["rowCol"] == [1 + r for r in rows]
    k = 0
    for seg in segments or result.attention:
        T, S = len(seg), len(seg[0])
        H = S - T
        for t in range(T):
            w = full_row(panel, k + t)
            assert sum(w) == pytest.approx(sum(seg[t]), abs=1e-4)
            for u in range(t + 1):  # the tokens of the segment read so far
                assert w[1 + rows[k + u]] == pytest.approx(seg[t][H + u], abs=1e-5)
            if sentences:  # nothing outside the row's sentence: its <s> .. itself
                start = max(i for i in range(rows[k + t] + 1) if tokens[i] == "<s>")
                assert not any(w[1:1 + start]) and not any(w[2 + rows[k + t]:])
        k += T
    assert k == len(rows)
    if segments is None:  # the top layer's panel: the next-word distributions too
        for (word, p), r, lp in zip(panel["next"], rows, result.logprobs):
            assert word == tokens[r + 1] and p == pytest.approx(math.exp(lp), abs=1e-5)
        assert all(top[0][1] >= p - 1e-6 for top, (_, p) in zip(panel["topk"], panel["next"]))


def check_layers(panels: dict, pid: str, layers: list) -> None:
    """A deep LSTMN: one panel per layer (the top is ``pid``), each equal to that layer's (T, S) trace, stepped
    together."""
    L = len(layers)
    ids = [f"{pid}-layer-{k + 1}" for k in range(L - 1)] + [pid]
    assert L > 1 and all(i in panels for i in ids) and f"{pid}-layer-{L}" not in panels
    for i, layer in zip(ids, layers):
        assert close(matrix_rows(panels[i]), layer)
        assert panels[i]["group"] == panels[pid]["group"]


def check_bars(panel: dict, probabilities: dict) -> None:
    assert dict(zip(panel["labels"], panel["values"])) == pytest.approx(probabilities, abs=1e-5)


def check_view(family: str, view: dict, result) -> None:
    panels = {p["id"]: p for p in view["panels"]}
    if family in LM:
        assert len(result.attention) > 1  # several segments (bptt 5, or sentences): the stitching is tested
        check_lm(panels["attention"], result)
        if FAMILIES[family][1].get("layers", 1) > 1:  # a deep LSTMN: every layer, the top its attention
            L = FAMILIES[family][1]["layers"]
            assert all(len(seg) == L and seg[-1] == att for seg, att in zip(result.attention_layers, result.attention))
            for k in range(L - 1):
                check_lm(panels[f"attention-layer-{k + 1}"], result, [seg[k] for seg in result.attention_layers])
            assert panels["attention-layer-1"]["group"] == panels["attention"]["group"]
        else:
            assert result.attention_layers is None and "attention-layer-1" not in panels
        assert view["summary"][0] == ["perplexity", pytest.approx(result.ppl, abs=1e-5)]
    elif family in ("nse", "lstmn_classify"):
        m = panels["attention"]
        assert close(matrix_rows(m), result.attention)
        if family == "nse":
            assert m["writes"] and "z_t" in m["title"]
        else:
            check_layers(panels, "attention", result.attention_layers)
        check_bars(panels["probabilities"], result.probabilities)
    elif family in PAIRS:
        trace = result.attention
        first, second = PAIR["premise"].split(), PAIR["hypothesis"].split()
        assert panels["first"]["rows"] == panels["first"]["cols"] == first
        assert panels["second"]["rows"] == panels["second"]["cols"] == second
        assert close(matrix_rows(panels["first"]), trace["first"])
        assert close(matrix_rows(panels["second"]), trace["second"])
        if family == "mma":  # the second NSE's own memory, and the first's memory apart
            assert panels["second"]["writes"] and panels["second-shared-1"]["writes"]
            assert panels["second-shared-1"]["rows"] == second and panels["second-shared-1"]["cols"] == first
            assert close(matrix_rows(panels["second-shared-1"]), trace["second_shared"][0])
            assert close(full_row(panels["pooling"], 0), trace["pooling"])
        else:  # the fusion decoder: intra-attention over its tape and inter-attention over the first's
            assert panels["inter"]["rows"] == second and panels["inter"]["cols"] == first
            assert close(matrix_rows(panels["inter"]), trace["inter"])
            assert panels["inter"]["group"] == panels["second"]["group"]
            if family == "deep_fusion":
                check_layers(panels, "first", trace["first_layers"])
        check_bars(panels["probabilities"], result.probabilities)
    elif family == "document":
        trace = result.attention
        sentences = [s.split() for s in DOCUMENT["sentences"]]
        m = panels["sentences"]
        assert m["rows"] == m["cols"] == [w for s in sentences for w in s] and m["writes"]
        offset = 0
        for sent, z in zip(sentences, trace["sentences"]):  # each sentence's block: its own memory
            n = len(sent)
            for t in range(n):
                w = full_row(m, offset + t)
                assert close(w[offset: offset + n], z[t][:n]) and not any(w[:offset]) and not any(w[offset + n:])
            assert not any(x for row in z[n:] for x in row) and not any(x for row in z for x in row[n:])  # padding
            offset += n
        assert close(matrix_rows(panels["document"]), trace["document"]) and panels["document"]["writes"]
        check_bars(panels["probabilities"], result.probabilities)
        assert view["summary"][0] == ["rating", result.label]
    elif family in TRANSLATION:
        trace = result.attention
        assert view["summary"][0] == ["translation", result.text]
        m = panels["source"]
        n = len(trace["source"])
        assert n in (len(result.tokens), len(result.tokens) + 1)
        assert m["rows"] == (result.tokens + ["</s>"])[:n] and m["cols"] == SOURCE.split()
        assert close(matrix_rows(m), trace["source"])
        if family.startswith("lstmn"):
            assert close(matrix_rows(panels["target"]), trace["target"])
            assert panels["target"]["cols"] == (["<s>"] + result.tokens)[:n]
            assert close(matrix_rows(panels["encoder"]), trace["encoder"])
            if family == "lstmn_deep":
                check_layers(panels, "encoder", trace["encoder_layers"])
        else:
            assert "target" not in panels
        if family == "nse_decoder":
            assert m["writes"] and close(matrix_rows(panels["encoder"]), trace["encoder"])
    else:
        doc = panels["document"]
        steps = result.attention["document_steps"] if family == "iaa" else [result.attention]
        assert close(matrix_rows(doc), steps)
        if family == "iaa":
            q = panels["query"]
            assert close(matrix_rows(q), result.attention["query_steps"])
            assert steps[-1] == pytest.approx(result.attention["document"], abs=1e-6)
            assert doc["group"] == q["group"]
        bars = panels["candidates"]
        check_bars(bars, result.probabilities)
        assert bars["highlight"] == result.answer == view["summary"][0][1]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_the_view_is_the_predictors_trace(models, family):
    model = models[family]
    view = build_view(model, INPUTS[family])
    json.dumps(view)  # plain JSON
    check_view(family, view, model.predict(INPUTS[family], attention=True))


def outputs(result) -> dict:
    """A prediction without its traces."""
    return {k: v for k, v in vars(result).items() if not k.startswith("attention")}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_tracing_changes_no_output(models, family):
    model = models[family]
    plain = model.predict(INPUTS[family])
    traced = model.predict(INPUTS[family], attention=True)
    assert plain.attention is None and traced.attention is not None
    assert outputs(traced) == outputs(plain)  # the same numbers, exactly
    if family in TRANSLATION:  # greedy decoding too
        assert outputs(model.predict(SOURCE, attention=True, beam=1)) == outputs(model.predict(SOURCE, beam=1))


def test_translation_views_follow_the_decoding(models):
    model = models["lstmn_deep"]
    greedy = build_view(model, SOURCE, beam=1)
    assert greedy["summary"][1] == ["decoding", "greedy"]
    check_view("lstmn_deep", greedy, model.predict(SOURCE, attention=True, beam=1))
    for bad in (0, 21, "5", 2.5):
        with pytest.raises(ExploreError, match="beam must be a whole number from 1"):
            build_view(model, SOURCE, beam=bad)


def test_window_readers_get_attention_by_position(models):
    view = build_view(models["window"], LM_TEXT)
    profile = next(p for p in view["panels"] if p["type"] == "profile")
    assert profile["labels"] == ["-3", "-2", "-1"]
    # by hand: the mean, over rows with 3 earlier tokens, of the weight on each of them
    m = next(p for p in view["panels"] if p["id"] == "attention")
    rows = [full_row(m, i) for i in range(3, len(m["rows"]))]
    expected = [sum(w[1 + i - d] for i, w in zip(range(3, len(m["rows"])), rows)) / len(rows) for d in (3, 2, 1)]
    assert profile["values"] == pytest.approx(expected, abs=1e-5)


def test_cloze_predictions_carry_every_inference_step(models):
    iaa = models["iaa"].predict(CLOZE, attention=True)
    assert set(iaa.attention) == {"document", "query_steps", "document_steps"}
    plain = models["iaa"].predict(CLOZE)
    assert plain.attention is None and plain.probabilities == pytest.approx(iaa.probabilities, abs=1e-6)
    assert isinstance(models["as_reader"].predict(CLOZE, attention=True).attention, list)


def test_bad_inputs_get_one_line(models):
    model = models["lstmn"]
    for bad, words in [("", "empty"), ("   \n ", "empty"), ("zzqx qqzv", "vocabulary"),
                       ("the " * (MAX_TOKENS + 1), f"at most {MAX_TOKENS}")]:
        with pytest.raises(ExploreError, match=words) as e:
            build_view(model, bad)
        assert "\n" not in str(e.value)
    view = build_view(model, "the zzqx cat")  # some words unknown: read as <unk>, said in a note
    assert "zzqx" in view["notes"][0]
    with pytest.raises(ExploreError, match="at most 5"):
        build_view(model, "the cat sat on the mat", max_tokens=5)


# ----------------------------------------------------------------------------- the server


@pytest.fixture
def server(models):
    srv = serve(models["lstmn"])
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def request(srv, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    hdrs = {"Host": f"127.0.0.1:{srv.port}", **(headers or {})}
    conn.request(method, path, body=body, headers=hdrs)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, data


def post(srv, payload, **headers):
    return request(srv, "POST", "/api/predict", json.dumps(payload).encode(),
                   {"Content-Type": "application/json", **headers})


def test_server_listens_on_loopback_only_and_serves_the_page(server):
    assert server.server_address[0] == "127.0.0.1" and server.url == f"http://127.0.0.1:{server.port}/"
    status, page = request(server, "GET", "/")
    assert status == 200 and b"explore.js" in page
    for asset in ("/explore.js", "/explore.css"):
        assert request(server, "GET", asset)[0] == 200
    status, info = request(server, "GET", "/api/info")
    info = json.loads(info)
    assert status == 200 and info["model"]["kind"] == "lm" and info["model"]["max_tokens"] == MAX_TOKENS
    assert info["examples"] and all(set(x) == {"text"} for x in info["examples"])
    status, body = post(server, {"input": LM_TEXT}, Origin=f"http://127.0.0.1:{server.port}")
    assert status == 200 and json.loads(body) == json.loads(json.dumps(build_view(server.predictor, LM_TEXT)))


def test_server_refuses_other_origins_and_oversized_requests(server):
    port = server.port
    assert post(server, {"input": LM_TEXT}, Origin="http://evil.example")[0] == 403
    assert post(server, {"input": LM_TEXT}, Origin=f"http://127.0.0.1:{port + 1}")[0] == 403
    assert post(server, {"input": LM_TEXT}, Host="evil.example")[0] == 403  # DNS rebinding
    assert request(server, "GET", "/api/info", headers={"Host": f"attacker.test:{port}"})[0] == 403
    assert request(server, "GET", "/", headers={"Origin": "http://evil.example"})[0] == 403
    status, body = request(server, "POST", "/api/predict", json.dumps({"input": "the cat"}).encode(),
                           {"Content-Type": "text/plain"})  # a form post from another page: no preflight
    assert status == 415
    for size in (MAX_BODY + 1, 3 * MAX_BODY):  # more than the sockets buffer: the server reads it before it answers
        status, body = request(server, "POST", "/api/predict", b"x" * size, {"Content-Type": "application/json"})
        assert status == 413 and "at most" in json.loads(body)["error"]
    status, body = post(server, {"input": "the " * 100_000})
    assert status == 400 and json.loads(body)["error"].startswith("the input has 100000 tokens")
    status, body = post(server, {"input": {"txt": "x"}})
    assert status == 400 and "text" in json.loads(body)["error"]
    assert post(server, {"input": "the cat"}, Origin=f"http://localhost:{port}")[0] == 200
    status, body = post(server, {"input": "the cat", "beam": 0})
    assert status == 400 and json.loads(body)["error"].startswith("the beam must be a whole number from 1")


# ----------------------------------------------------------------------------- --html


def test_html_export_is_one_self_contained_file(models, tmp_path, capsys, monkeypatch):
    out = write_html(models["iaa"], [CLOZE, {**CLOZE, "query": "the @blank ran"}], tmp_path / "v.html")
    html = out.read_text()
    assert "window.MEMREAD_STATIC" in html and "<style>" in html
    for ref in ('src="', 'href="http', "https://", 'href="explore'):
        assert ref not in html
    data = json.loads(html.split("window.MEMREAD_STATIC = ", 1)[1].split(";</script>", 1)[0])
    assert len(data["views"]) == 2 and data["views"][0] == json.loads(json.dumps(build_view(models["iaa"], CLOZE)))
    # a text holding "</script>" cannot end the script element early
    nasty = write_html(models["lstmn"], ["the cat </script> sat"], tmp_path / "n.html").read_text()
    assert nasty.count("</script>") == 2

    run = models["lstmn"].source
    monkeypatch.setenv("MEMREAD_DATA", str(Path(run).parent))
    capsys.readouterr()
    code = cli.main(["explore", run, "--html", str(tmp_path / "cli.html"), "--text", "the cat sat", "--text", "a dog"])
    assert code == 0 and json.loads(capsys.readouterr().out) == {"html": str(tmp_path / "cli.html"), "inputs": 2}
    assert cli.main(["explore", run, "--html", str(tmp_path / "x.html")]) == 2
    assert "--html needs inputs" in capsys.readouterr().err
    assert cli.main(["explore", run, "--html", str(tmp_path / "x.html"), "--text", "zzqx"]) == 2
    assert "vocabulary" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_serves_on_a_printed_loopback_address(models, tmp_path):
    run = models["lstmn"].source
    proc = subprocess.Popen([sys.executable, "-m", "memread", "explore", run, "--data-root", str(Path(run).parent)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("memread explore: http://127.0.0.1:"), (line, proc.stderr.read() if proc.poll() else "")
        port = int(line.split("127.0.0.1:")[1].split("/")[0])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/")
        assert conn.getresponse().status == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)


# ----------------------------------------------------------------------------- in a real browser


def browser_or_skip():
    try:
        from selenium import webdriver
    except ImportError:
        pytest.skip("selenium is not installed (pip install -e '.[test]'): the page is not tested in a browser")
    binary = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
    driver = shutil.which("chromedriver")
    if binary is None or driver is None:
        pytest.skip("no headless Chromium here (apt-get install chromium chromium-driver): the page is not tested "
                    "in a browser")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1400"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=webdriver.ChromeService(driver), options=options)


@pytest.fixture(scope="module")
def browser():
    driver = browser_or_skip()
    yield driver
    driver.quit()


class Servers(dict):
    """A server of each family's tiny run, started the first time a test asks for it."""

    def __init__(self, models: Tiny):
        super().__init__()
        self.models = models

    def __missing__(self, family: str):
        srv = serve(self.models[family])
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self[family] = srv
        return srv


@pytest.fixture(scope="module")
def servers(models):
    started = Servers(models)
    yield started
    for srv in started.values():
        srv.shutdown()
        srv.server_close()


def wait_for(driver, condition, timeout: float = 30.0):
    end = time.time() + timeout
    while time.time() < end:
        value = driver.execute_script(condition)
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for: {condition}")


def console_errors(driver) -> list:
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def open_page(driver, srv):
    driver.get(srv.url)
    wait_for(driver, "return window.memreadState && window.memreadState.info")


def read_input(driver, item) -> None:
    from selenium.webdriver.common.by import By

    before = driver.execute_script("return +document.body.dataset.rendered || 0")
    box = driver.find_element(By.ID, "input")
    box.clear()
    box.send_keys(item if isinstance(item, str) else json.dumps(item))
    driver.find_element(By.ID, "submit").click()
    wait_for(driver, f"return (+document.body.dataset.rendered || 0) > {before} || "
                     "document.getElementById('message').textContent")
    assert driver.find_element(By.ID, "message").text == ""


def shown_row(driver, panel: str) -> tuple[int, list[float]]:
    """The row a matrix panel shows now and its weights, as drawn (the shading of its tokens)."""
    return driver.execute_script(
        f"const b = document.getElementById('panel-{panel}');"
        "return [+b.dataset.row, [...b.querySelectorAll('.tok')].map(s => +s.dataset.w)];")


# one browser test per reader family (the rest are checked on the view's JSON above), and the panel whose drawing
# is compared with the data
IN_BROWSER = {"lstmn": "attention", "window": "attention", "nse": "attention", "iaa": "document",
              "as_reader": "document", "kvp": "attention", "sentence": "attention-layer-1", "mma": "second-shared-1",
              "deep_fusion": "inter", "document": "sentences", "lstmn_deep": "source", "nse_decoder": "source"}


@pytest.mark.slow
@pytest.mark.parametrize("family", list(IN_BROWSER))
def test_the_page_shows_the_readers_real_numbers(browser, servers, models, family):
    open_page(browser, servers[family])
    assert console_errors(browser) == []
    read_input(browser, INPUTS[family])
    view = browser.execute_script("return window.memreadState.view")
    result = models[family].predict(INPUTS[family], attention=True)
    check_view(family, view, result)  # the page's data is the reader's trace
    panel = IN_BROWSER[family]
    p = next(x for x in view["panels"] if x["id"] == panel)
    row, drawn = shown_row(browser, panel)
    assert drawn == pytest.approx(full_row(p, row), abs=1e-6)  # and what is drawn is that data
    if p.get("group"):  # a step moves every panel of its group (the layers, the memories, source and target)
        browser.execute_script(f"document.querySelector('#panel-{panel} button.next').click()")
        grouped = [x["id"] for x in view["panels"] if x.get("group") == p["group"]]
        assert len(grouped) > 1 and {shown_row(browser, g)[0] for g in grouped} == {min(row + 1, len(p["rows"]) - 1)}
    assert console_errors(browser) == []


@pytest.mark.slow
def test_the_translation_page_decodes_greedy_or_with_a_beam(browser, servers, models):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    open_page(browser, servers["lstmn_deep"])
    assert browser.find_element(By.ID, "beam-box").is_displayed()
    Select(browser.find_element(By.ID, "beam")).select_by_value("1")
    read_input(browser, SOURCE)
    view = browser.execute_script("return window.memreadState.view")
    assert view["summary"][1] == ["decoding", "greedy"]
    check_view("lstmn_deep", view, models["lstmn_deep"].predict(SOURCE, attention=True, beam=1))
    Select(browser.find_element(By.ID, "beam")).select_by_value("3")
    read_input(browser, SOURCE)
    view = browser.execute_script("return window.memreadState.view")
    assert view["summary"][1] == ["decoding", "beam search, beam 3"]
    check_view("lstmn_deep", view, models["lstmn_deep"].predict(SOURCE, attention=True, beam=3))
    open_page(browser, servers["lstmn"])
    assert not browser.find_element(By.ID, "beam-box").is_displayed()  # a language model has no decoding
    assert console_errors(browser) == []


@pytest.mark.slow
def test_stepping_moves_through_the_rows(browser, servers, models):
    from selenium.webdriver.common.by import By

    open_page(browser, servers["lstmn"])
    read_input(browser, LM_TEXT)
    result = models["lstmn"].predict(LM_TEXT, attention=True)
    flat = [row for seg in result.attention for row in seg]
    box = browser.find_element(By.ID, "panel-attention")
    start, _ = shown_row(browser, "attention")
    for k in range(1, 4):
        box.find_element(By.CSS_SELECTOR, "button.next").click()
        row, drawn = shown_row(browser, "attention")
        assert row == start + k
        assert sum(drawn) == pytest.approx(sum(flat[row]), abs=1e-4)
        assert box.find_element(By.CSS_SELECTOR, ".steplabel").text.endswith(result.tokens[row])
    box.find_element(By.CSS_SELECTOR, "button.prev").click()
    assert shown_row(browser, "attention")[0] == start + 2
    # hovering a token shows its row
    from selenium.webdriver import ActionChains

    tok = box.find_elements(By.CSS_SELECTOR, ".tok")[1 + 5]  # token 5
    ActionChains(browser).move_to_element(tok).perform()
    assert shown_row(browser, "attention")[0] == 5

    # IAA: one step moves the query and the document attention together
    open_page(browser, servers["iaa"])
    read_input(browser, CLOZE)
    iaa = models["iaa"].predict(CLOZE, attention=True).attention
    browser.find_element(By.CSS_SELECTOR, "#panel-document button.next").click()
    for panel, key in (("document", "document_steps"), ("query", "query_steps")):
        row, drawn = shown_row(browser, panel)
        assert row == 2 and drawn == pytest.approx(iaa[key][2], abs=1e-5)
    assert console_errors(browser) == []


@pytest.mark.slow
def test_bad_input_gets_a_message_in_the_page(browser, servers):
    from selenium.webdriver.common.by import By

    open_page(browser, servers["lstmn"])
    message = lambda: browser.find_element(By.ID, "message")  # noqa: E731
    browser.find_element(By.ID, "submit").click()
    assert message().text == "the input is empty: type or paste a text" and "error" in message().get_attribute("class")
    browser.find_element(By.ID, "input").send_keys("zzqx")
    browser.find_element(By.ID, "submit").click()
    wait_for(browser, "return document.getElementById('message').textContent")
    assert message().text.startswith("no word of the input is in the model's vocabulary (zzqx)")
    # a 100k-token paste (set at once, as a paste does): refused at once, and the page stays responsive
    browser.execute_script("document.getElementById('input').value = 'the '.repeat(100000);")
    t = time.time()
    browser.find_element(By.ID, "submit").click()
    assert message().text.startswith(f"the input has 100000 tokens; explore reads at most {MAX_TOKENS}")
    assert time.time() - t < 15  # refused before any reading (generous: CI shares 2 cores)
    # the server says the same where the page's check is bypassed
    status = browser.execute_script(
        "return fetch('api/predict', {method: 'POST', headers: {'Content-Type': 'application/json'},"
        " body: JSON.stringify({input: 'the '.repeat(100000)})}).then(r => r.json()).then(d => d.error)")
    assert status.startswith("the input has 100000 tokens")
    read_input(browser, "the cat sat")  # and it still reads
    # the refusals are answered 400, which Chromium logs as a failed resource: those and nothing else
    assert [e for e in console_errors(browser) if "status of 400" not in e["message"]] == []


@pytest.mark.slow
def test_a_long_document_reads_without_freezing(browser, servers):
    open_page(browser, servers["lstmn"])
    words = ("the cat sat on the mat the big dog ran under the red rug " * 100).split()[: MAX_TOKENS - 1]
    browser.execute_script("document.getElementById('input').value = arguments[0];", " ".join(words))
    t = time.time()
    browser.execute_script("document.getElementById('submit').click()")
    wait_for(browser, "return +document.body.dataset.rendered >= 1", timeout=120)
    assert time.time() - t < 60
    # a step redraws quickly
    t = time.time()
    browser.execute_script("document.querySelector('#panel-attention button.next').click()")
    assert time.time() - t < 10
    assert console_errors(browser) == []


@pytest.mark.slow
def test_the_html_file_draws_in_the_browser(browser, models, tmp_path):
    out = write_html(models["nse"], ["the big cat sat good", "a dog ran bad"], tmp_path / "nse.html")
    browser.get(out.as_uri())
    wait_for(browser, "return +document.body.dataset.rendered >= 1")
    view = browser.execute_script("return window.memreadState.view")
    check_view("nse", view, models["nse"].predict("the big cat sat good", attention=True))
    assert console_errors(browser) == []
