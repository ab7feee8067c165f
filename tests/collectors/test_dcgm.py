"""DcgmSampler against a real HTTP server on loopback serving the recorded dcgm-exporter scrapes."""

from __future__ import annotations

import math
import random
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscope.collectors.base import Sampler
from gpuscope.collectors.dcgm import DcgmSampler, ScrapeError, describe_scrape, normalize_url, parse_scrape
from gpuscope.collectors.dcgm_fields import FIELDS, OLD_NAMES
from gpuscope.model import schema as S
from gpuscope.model.schema import SampleRow, mig_gpu
from tests.conftest import SAMPLES, load_benchmark

DCGM_DIR = SAMPLES / "dcgm"
THIRD = DCGM_DIR / "third_party_samples"
NOW = 1_800_000_000_000_000_000
MIB = 2**20


def readme_block(path: Path) -> str:
    """The `curl .../metrics` output in the exporter README, "..." elisions and all."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("curl")) + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("```"))
    return "\n".join(lines[start:end]) + "\n"


def issue_blocks() -> dict[str, str]:
    """github_issue_excerpts.prom split on its `# SOURCE` comments, keyed by the issue URL."""
    blocks: dict[str, str] = {}
    key = None
    for line in (THIRD / "github_issue_excerpts.prom").read_text().splitlines():
        if line.startswith("# SOURCE "):
            key = line.split()[2]
            blocks[key] = ""
        elif key is not None:
            blocks[key] += line + "\n"
    return blocks


ISSUES = issue_blocks()
SCRAPES = {
    "docker": readme_block(DCGM_DIR / "README_metrics_example_docker.txt"),
    "k8s": readme_block(DCGM_DIR / "README_metrics_example_k8s.txt"),
    "datadog_serve": (THIRD / "datadog_integrations-core_dcgm_tests_docker_serve_metrics.prom").read_text(),
    "datadog_fixtures": (THIRD / "datadog_integrations-core_dcgm_tests_fixtures_metrics.prom").read_text(),
    **{f"issue{url.rstrip('/').rsplit('/', 1)[-1]}": block for url, block in ISSUES.items()},
}


class Exporter:
    """A real HTTP server on 127.0.0.1: GET /NAME/metrics serves SCRAPES[NAME]; /garbage, /error, /slow misbehave."""

    def __init__(self) -> None:
        self.release = threading.Event()
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's spelling)
                name = self.path.strip("/").split("/")[0]
                if name == "slow":
                    exporter.release.wait(10)
                    return
                if name == "error":
                    self.send_error(500, "Internal Server Error")
                    return
                body = b"<html><body><h1>Welcome to nginx!</h1></body></html>\n" if name == "garbage" \
                    else SCRAPES[name].encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/{name}/metrics"

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def exporter() -> Iterator[Exporter]:
    server = Exporter()
    yield server
    server.stop()


def scrape(exporter: Exporter, name: str) -> tuple[DcgmSampler, list[SampleRow]]:
    sampler = DcgmSampler(exporter.url(name), timeout_s=2.0)
    return sampler, sampler.sample(NOW)


def values(rows: list[SampleRow]) -> dict[tuple[int, str], float]:
    out: dict[tuple[int, str], float] = {}
    for ts, source, gpu, pid, metric, value in rows:
        assert (ts, source, pid) == (NOW, S.DCGM, S.NO_PID)
        assert (gpu, metric) not in out
        out[(gpu, metric)] = value
    return out


@pytest.mark.parametrize("name", sorted(set(SCRAPES) - {"issue193"}))
def test_every_recorded_scrape_parses_over_http(exporter: Exporter, name: str) -> None:
    sampler, rows = scrape(exporter, name)
    assert isinstance(sampler, Sampler)
    assert rows, f"{name}: no samples"
    assert sampler.gaps == 0 and sampler.last_error is None
    for _, _, _, _, metric, value in rows:
        assert value < 1e15, f"{name}: a sentinel got through as {metric}={value}"
        if metric in (S.GPU_UTIL, S.GPU_MEM_UTIL, S.GPU_SM_ACTIVE, S.GPU_SM_OCCUPANCY, S.GPU_TENSOR_ACTIVE,
                      S.GPU_DRAM_ACTIVE, S.GPU_GR_ENGINE_ACTIVE):
            assert 0.0 <= value <= 1.0
    assert DcgmSampler.probe(exporter.url(name), timeout_s=2.0) is None


def test_readme_scrape_drops_the_not_supported_sentinel(exporter: Exporter) -> None:
    for name in ("docker", "k8s"):
        _, rows = scrape(exporter, name)
        assert values(rows) == {(0, S.GPU_SM_CLOCK_MHZ): 139, (0, S.GPU_MEM_CLOCK_MHZ): 405}, \
            "DCGM_FI_DEV_MEMORY_TEMP 9223372036854775794 means not supported: no row"


def test_datadog_t4_units(exporter: Exporter) -> None:
    sampler, rows = scrape(exporter, "datadog_serve")
    got = values(rows)
    assert got[(0, S.GPU_POWER_W)] == pytest.approx(8.969)
    assert got[(0, S.GPU_ENERGY_J)] == pytest.approx(128_996.013)
    assert got[(0, S.GPU_MEMORY_FREE_BYTES)] == 15109 * MIB
    assert got[(0, S.GPU_MEMORY_USED_BYTES)] == 0.0, "a real 0 stays a 0"
    assert got[(0, S.GPU_UTIL)] == 0.0 and got[(0, S.GPU_TEMPERATURE_C)] == 25
    # the file joins two exporters' answers; the second one adds total memory, power limit and clock reasons
    assert got[(0, S.GPU_MEMORY_TOTAL_BYTES)] == 15109 * MIB
    assert got[(0, S.GPU_POWER_LIMIT_W)] == 70.0 and got[(0, S.GPU_THROTTLE_REASONS)] == 1
    device = sampler.devices[0]
    assert (device.model, device.hostname, device.uuid) == ("Tesla T4", "424773df46e0",
                                                            "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e")


def test_hostname_filter_keeps_one_host() -> None:
    text = SCRAPES["datadog_serve"]
    got = values(parse_scrape(text, NOW, hostname="424773df46e0"))
    assert (0, S.GPU_MEMORY_TOTAL_BYTES) not in got and (0, S.GPU_POWER_LIMIT_W) not in got
    assert got[(0, S.GPU_SM_CLOCK_MHZ)] == 300
    assert parse_scrape(text, NOW, hostname="elsewhere") == []


def test_datadog_dummy_unlabelled_block_is_skipped(exporter: Exporter) -> None:
    _, rows = scrape(exporter, "datadog_fixtures")
    got = values(rows)
    assert {gpu for gpu, _ in got} == {0}
    assert got[(0, S.GPU_DRAM_ACTIVE)] == pytest.approx(0.000003), "PROF ratios are kept as 0..1"
    assert (0, S.GPU_SM_ACTIVE) not in got, "the unlabelled dummy SM_ACTIVE cannot be attributed"


def test_old_and_new_names(exporter: Exporter) -> None:
    old = values(scrape(exporter, "issue188")[1])
    assert old == {(0, S.GPU_SM_CLOCK_MHZ): 585, (0, S.GPU_MEM_CLOCK_MHZ): 5000, (0, S.GPU_TEMPERATURE_C): 54,
                   (0, S.GPU_POWER_W): pytest.approx(30.982), (0, S.GPU_ENERGY_J): pytest.approx(55_491_669.881),
                   (0, S.GPU_UTIL): 0.0}
    new = values(scrape(exporter, "issue138")[1])
    assert new[(0, S.GPU_UTIL)] == pytest.approx(0.44), "DEV utilization is percent"
    assert new[(0, S.GPU_ENERGY_J)] == pytest.approx(4_335_301.032), "above 2**31 mJ and still a value"
    assert new[(0, S.GPU_MEMORY_TEMPERATURE_C)] == 54
    a5000 = values(scrape(exporter, "issue363")[1])
    assert a5000 == {(0, S.GPU_UTIL): 0.0, (0, S.GPU_MEMORY_USED_BYTES): 21383 * MIB}


def test_eight_titans(exporter: Exporter) -> None:
    got = values(scrape(exporter, "issue58")[1])
    assert got == {(i, S.GPU_SM_CLOCK_MHZ): (1335 if i == 4 else 135) for i in range(5)}


def test_mig_instances_stay_apart(exporter: Exporter) -> None:
    sampler, rows = scrape(exporter, "issue166")
    got = values(rows)
    assert got == {(mig_gpu(0, 8), S.GPU_GR_ENGINE_ACTIVE): pytest.approx(0.029399),
                   (mig_gpu(0, 9), S.GPU_GR_ENGINE_ACTIVE): pytest.approx(0.033893),
                   (mig_gpu(0, 10), S.GPU_GR_ENGINE_ACTIVE): 0.0}
    device = sampler.devices[mig_gpu(0, 9)]
    assert (device.parent, device.mig_instance, device.mig_profile, device.pci_bus_id) == \
        (0, 9, "1g.10gb", "00000001:00:00.0")
    assert S.split_gpu(device.gpu) == (0, 9)

    old_namespace = describe_scrape(SCRAPES["issue272"])
    assert sorted(old_namespace) == [mig_gpu(0, 1), mig_gpu(0, 2), mig_gpu(1, 1)]
    assert old_namespace[mig_gpu(0, 2)].mig_profile == "4g.40gb"
    assert old_namespace[mig_gpu(1, 1)].uuid == "GPU-6043e4b2-feaa-8010-34c7-61d1a01576bb", "lowercase uuid label"
    assert set(values(parse_scrape(SCRAPES["issue272"], NOW))) == {(g, S.GPU_GR_ENGINE_ACTIVE) for g in old_namespace}

    h100 = describe_scrape(SCRAPES["issue512"])
    assert h100[mig_gpu(0, 7)].pod == "text-embedding-predictor-00008-deployment-57946f6c67-vdtjl"
    assert h100[mig_gpu(0, 8)].pod is None and h100[mig_gpu(0, 7)].namespace == "model-playground-stg"
    a30 = values(parse_scrape(SCRAPES["issue317"], NOW))
    assert a30 == {(mig_gpu(0, 3), S.GPU_TENSOR_ACTIVE): 0.0, (mig_gpu(1, 3), S.GPU_TENSOR_ACTIVE): 0.0}


def test_garbage_error_slow_closed_and_empty_are_gaps(exporter: Exporter) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    cases = {
        exporter.url("garbage"): "not Prometheus text",
        exporter.url("error"): "HTTP 500",
        exporter.url("issue193"): "no DCGM metric",  # only a commented-out line
        f"127.0.0.1:{closed_port}": "unreachable (Connection refused)",
    }
    for url, reason in cases.items():
        sampler = DcgmSampler(url, timeout_s=2.0)
        assert sampler.sample(NOW) == [] and sampler.sample(NOW + 1) == []
        assert sampler.gaps == 2
        assert sampler.last_error is not None and reason in sampler.last_error and "\n" not in sampler.last_error
        assert sampler.last_error.startswith(f"DCGM endpoint {normalize_url(url)}: ")
        assert DcgmSampler.probe(url, timeout_s=2.0) == sampler.last_error

    slow = DcgmSampler(exporter.url("slow"), timeout_s=0.2)
    assert slow.sample(NOW) == []
    assert slow.gaps == 1 and slow.last_error == f"DCGM endpoint {exporter.url('slow')}: no answer within 0.2 s"


def test_gap_then_recovery_keeps_counting(exporter: Exporter) -> None:
    sampler = DcgmSampler(exporter.url("error"), timeout_s=2.0)
    assert sampler.sample(NOW) == []
    sampler.url = exporter.url("issue58")
    assert len(sampler.sample(NOW)) == 5
    assert sampler.gaps == 1 and sampler.last_error is not None and "HTTP 500" in sampler.last_error


def test_url_forms() -> None:
    assert normalize_url("gpu-node:9400") == "http://gpu-node:9400/metrics"
    assert normalize_url("http://gpu-node:9400/") == "http://gpu-node:9400/metrics"
    assert normalize_url("https://x/custom") == "https://x/custom"
    bad = DcgmSampler("http://[not-a-host/metrics")
    assert bad.sample(NOW) == [] and bad.gaps == 1
    assert bad.last_error is not None and "not a valid URL" in bad.last_error
    assert DcgmSampler.probe("http://[not-a-host") == \
        "DCGM endpoint http://[not-a-host: not a valid URL (Invalid IPv6 URL)"
    assert "unreachable" in (DcgmSampler.probe("http:///metrics") or "")


def test_a_dead_endpoint_is_left_alone_for_a_while(exporter: Exporter) -> None:
    second = 1_000_000_000
    sampler = DcgmSampler(exporter.url("error"), timeout_s=2.0)
    for i in range(3):
        assert sampler.sample(NOW + i) == []
    assert sampler.gaps == 3
    sampler.url = exporter.url("issue58")  # it comes back, but the sampler waits 1 s before asking again
    assert sampler.sample(NOW + 3) == [] and sampler.gaps == 3
    assert len(sampler.sample(NOW + 2 + second)) == 5

    sampler.url = exporter.url("error")
    for i in range(4):
        sampler.sample(NOW + 10 * second + i)
    assert sampler.gaps == 6, "after a good scrape, three failures again before the 1 s wait"
    assert sampler.sample(NOW + 10 * second + 2 + second) == [] and sampler.gaps == 7, "asked after 1 s"
    assert sampler.sample(NOW + 10 * second + 2 + 2 * second) == [] and sampler.gaps == 7, "then waits 2 s"
    assert sampler.sample(NOW + 10 * second + 2 + 3 * second) == [] and sampler.gaps == 8


FRACTIONS = {S.GPU_UTIL, S.GPU_MEM_UTIL, S.GPU_SM_ACTIVE, S.GPU_SM_OCCUPANCY, S.GPU_TENSOR_ACTIVE, S.GPU_DRAM_ACTIVE,
             S.GPU_GR_ENGINE_ACTIVE}
NAMES = sorted({f"DCGM_FI_{key.upper()}" for key in FIELDS} | {f"dcgm_fi_{key}" for key in FIELDS} | set(OLD_NAMES))
SENTINELS = [9223372036854775794, 9223372036854775792, 2147483632, 2147483647, 140737488355328.0]
WIDE = {field.metric for field in FIELDS.values() if field.wide}
WIDE_SENTINELS = [9223372036854775794, 9223372036854775792, 140737488355328.0]
"""Blank in every field; the int32 ones above are real values of wide fields (energy, byte rates)."""


@settings(max_examples=60, deadline=None)
@given(st.text())
def test_any_text_gives_rows_or_a_scrape_error(text: str) -> None:
    try:
        rows = parse_scrape(text, NOW)
    except ScrapeError:
        return
    assert all(row[4] not in FRACTIONS or 0.0 <= row[5] <= 1.0 for row in rows)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(NAMES), st.integers(-2, 9), st.one_of(st.none(), st.integers(0, 1200)),
                          st.one_of(st.sampled_from(SENTINELS), st.floats(-10, 1e6), st.just(float("nan")),
                                    st.integers(0, 10**12))), max_size=20))
def test_generated_scrapes_keep_units_and_drop_sentinels(series: list[tuple[str, int, int | None, float]]) -> None:
    lines = []
    for name, gpu, instance, value in series:
        mig = f',GPU_I_PROFILE="1g.10gb",GPU_I_ID="{instance}"' if instance is not None else ""
        lines.append(f'{name}{{gpu="{gpu}",UUID="GPU-x"{mig}}} {value}')
    rows = parse_scrape("\n".join(lines) + "\n", NOW)
    for _, _, gpu, _, metric, value in rows:
        assert gpu >= 0 and S.split_gpu(gpu)[1] in (None, *range(S.MIG_GPU_BASE))
        assert value >= 0 and math.isfinite(value)
        if metric not in WIDE:  # energy and byte rates can reach 2**31 for real
            assert value not in SENTINELS
        if metric in FRACTIONS:
            assert value <= 1.0
    assert len({(row[2], row[4]) for row in rows}) == len(rows), "one value per GPU and metric"
    if all(value in WIDE_SENTINELS for *_, value in series):
        assert rows == [], "a value DCGM marks as not available is never recorded, whatever the field"


fi = load_benchmark("fuzz_http_inputs")


def check_scrape(body: bytes) -> None:
    """What the sampler does with a body (decoded as it decodes one): rows in gpuscope's units, or ScrapeError
    with one line; nothing else, and no warning."""
    try:
        rows = parse_scrape(body.decode("utf-8", errors="replace"), NOW)
    except ScrapeError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    for _, source, gpu, pid, metric, value in rows:
        assert (source, pid) == (S.DCGM, S.NO_PID) and gpu >= 0
        assert math.isfinite(value) and value >= 0 and value < 0x7FFFFFFFFFFFFFF0, (metric, value)
        assert metric not in FRACTIONS or value <= 1.0
    assert len({(row[2], row[4]) for row in rows}) == len(rows)


@pytest.mark.filterwarnings("error")
@settings(max_examples=200, deadline=None)
@given(st.randoms(use_true_random=False))
def test_recorded_and_generated_scrapes_mutated(rng: random.Random) -> None:
    """The inputs of benchmarks/fuzz_http_readers.py (which runs 10,000 of them), shrunk by Hypothesis on failure."""
    check_scrape(fi.dcgm_scrape(rng))


@pytest.mark.filterwarnings("error")
@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=2048))
def test_any_bytes_give_rows_or_a_scrape_error(body: bytes) -> None:
    check_scrape(body)


@pytest.mark.parametrize("line", [
    'DCGM_FI_DEV_GPU_UTIL{gpu="0"} 1' + "0" * 400,  # an int past any double: OverflowError out of the reader
    'DCGM_FI_DEV_GPU_UTIL{gpu="0"} -' + "9" * 400,
    'DCGM_FI_DEV_GPU_UTIL{gpu="0"} 1e999', 'DCGM_FI_DEV_GPU_UTIL{gpu="0"} 0x10', 'DCGM_FI_DEV_GPU_UTIL{gpu="0"} 1_0',
    'DCGM_FI_DEV_GPU_UTIL{gpu="0"} 50 1' + "0" * 400,  # a timestamp the parser divides by 1000: OverflowError too
    'DCGM_FI_DEV_FB_USED{gpu="0"} 922337203685477580',  # 900 EiB of memory: not a value, though not a sentinel
    'DCGM_FI_DEV_FB_USED{gpu="0"} 2147483648',
])
def test_a_value_no_counter_can_hold_is_no_row(line: str) -> None:
    rows = parse_scrape(f'{line}\nDCGM_FI_DEV_POWER_USAGE{{gpu="0"}} 70\n', NOW)
    assert values(rows) == {(0, S.GPU_POWER_W): 70.0}
    assert parse_scrape('DCGM_FI_DEV_FB_USED{gpu="0"} 2147483631\n', NOW)[0][5] == 2147483631 * MIB, \
        "just under DCGM's int32 blanks, still a value"


def test_a_scrape_past_the_series_cap_is_a_scrape_error() -> None:
    """The parser cannot be stopped part way: a scrape of more mapped lines than any node serves is refused
    before it is parsed, so one tick cannot take minutes."""
    from gpuscope.collectors.dcgm import MAX_SERIES

    line = 'DCGM_FI_DEV_GPU_UTIL{{gpu="{}",UUID="GPU-x"}} 50'
    at_cap = "\n".join(line.format(i % 8) for i in range(MAX_SERIES)) + "\n"
    assert len(parse_scrape(at_cap, NOW)) == 8
    with pytest.raises(ScrapeError, match=f"more than {MAX_SERIES:,} DCGM series in one scrape"):
        parse_scrape(at_cap + line.format(0) + "\n", NOW)
    page = "<p>not a metric</p>\n" * 200_000 + 'DCGM_FI_DEV_GPU_UTIL{gpu="0"} 50\n'
    assert values(parse_scrape(page, NOW)) == {(0, S.GPU_UTIL): 0.5}, "DCGM lines among others are still read"
    with pytest.raises(ScrapeError, match="not Prometheus text"):
        parse_scrape("<p>not a metric</p>\n" * 200_000 + "up 1\n", NOW)
