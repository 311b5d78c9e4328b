"""Access to the service (issue 29 item 11): the API key (from the environment or a file, never
the command line; compared in constant time; 401 otherwise; /health open), the bind rule
(anything but loopback needs a key or --insecure), CORS off by default with an allow-list, and
/docs off by default (its page loads Swagger UI from a CDN) while /openapi.json stays. No model
is loaded: a request that passes the key check gets the warming-up 503."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from rapidscore.serve.config import API_KEY_ENV, ServeConfig, is_loopback, load_config

KEY = "k3y-0123456789abcdef-XYZ"
BODY = {"candidates": ["a"], "references": ["b"]}


@pytest.fixture
def serving(live_server_class) -> Iterator:
    """``serving(config, ready=False) -> LiveServer`` whose models are never loaded, stopped at teardown."""
    pytest.importorskip("httpx", reason="the [serve] test dependencies (httpx) are not installed")
    servers: list = []

    def start(config: ServeConfig, ready: bool = False):
        servers.append(live_server_class(config, start=False, ready=ready))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def run_cli(*argv: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    import os

    environ = {key: value for key, value in os.environ.items() if key != API_KEY_ENV}
    environ.update(env or {})
    return subprocess.run([sys.executable, "-m", "rapidscore", "serve", *argv], capture_output=True, text=True,
                          timeout=timeout, env=environ)


# --- the API key --------------------------------------------------------------------------------

def test_requests_without_the_key_get_401_and_health_stays_open(serving) -> None:
    # issue 29 item 11: the service had no authentication at all
    import httpx

    server = serving(ServeConfig(api_key=KEY), ready=True)
    for method, path in (("POST", "/v1/bertscore"), ("POST", "/v1/similarity"), ("POST", "/v1/ner"),
                         ("POST", "/v1/refusal"), ("GET", "/metrics"), ("GET", "/openapi.json"),
                         ("GET", "/nosuch")):
        answer = httpx.request(method, f"{server.url}{path}", json=BODY)
        assert answer.status_code == 401, (path, answer.text)
        assert answer.json()["field"] == "authorization" and "API key" in answer.json()["detail"]
        assert answer.headers["www-authenticate"] == "Bearer"
    for headers in ({"Authorization": "Bearer wrong-key-0123456789"}, {"X-API-Key": KEY[:-1]},
                    {"Authorization": KEY}, {"Authorization": f"Basic {KEY}"}, {"X-API-Key": KEY + "x"}):
        assert httpx.post(f"{server.url}/v1/bertscore", json=BODY, headers=headers).status_code == 401, headers
    assert httpx.get(f"{server.url}/health").json() == {"status": "ok"}


def test_the_right_key_in_either_header_passes(serving) -> None:
    # issue 29 item 11
    import httpx

    server = serving(ServeConfig(api_key=KEY))  # not ready: a request that gets through is 503
    for headers in ({"Authorization": f"Bearer {KEY}"}, {"authorization": f"bearer  {KEY}"}, {"X-API-Key": KEY}):
        answer = httpx.post(f"{server.url}/v1/bertscore", json=BODY, headers=headers)
        assert answer.status_code == 503 and answer.json()["detail"] == "warming up", headers
        assert httpx.get(f"{server.url}/metrics", headers=headers).status_code == 200


def test_the_key_is_compared_in_constant_time(serving, monkeypatch) -> None:
    # issue 29 item 11: hmac.compare_digest, not ==, so a guess's timing does not say where it differs
    import httpx

    from rapidscore.serve import security

    compared: list[tuple[bytes, bytes]] = []
    real = security.hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(security.hmac, "compare_digest", spy)
    server = serving(ServeConfig(api_key=KEY))
    httpx.get(f"{server.url}/metrics", headers={"X-API-Key": "nope"})
    assert compared == [(b"nope", KEY.encode())]


def test_the_key_comes_from_the_environment_or_a_file(tmp_path) -> None:
    # issue 29 item 11: never from a settings value on the command line or in a settings file
    assert load_config(environ={API_KEY_ENV: KEY}).api_key == KEY
    assert load_config(environ={}).api_key is None
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    assert load_config(api_key_file=str(key_file), environ={API_KEY_ENV: "other-key-0123456789"}).api_key == KEY
    settings = tmp_path / "serve.toml"
    settings.write_text(f'api_key_file = "{key_file}"\n')
    assert load_config(settings, environ={}).api_key == KEY
    assert KEY not in repr(load_config(settings, environ={}))
    settings.write_text(f'api_key = "{KEY}"\n')
    with pytest.raises(ValueError, match="api_key is not read from a settings file"):
        load_config(settings, environ={})


@pytest.mark.parametrize("environ, message", [
    ({API_KEY_ENV: ""}, "is empty"),
    ({API_KEY_ENV: "short"}, "has 5 characters; use at least 16"),
    ({API_KEY_ENV: "with space 0123456789"}, "printable ASCII without spaces"),
])
def test_a_bad_key_is_refused(environ, message) -> None:
    # issue 29 item 11: an empty variable (a secret that failed to mount) is not "no key"
    with pytest.raises(ValueError, match=message):
        load_config(environ=environ)


def test_cli_refuses_a_key_on_the_command_line_without_echoing_it() -> None:
    # issue 29 item 11: --api-key VALUE used to be taken as an abbreviation of --api-key-file
    out = run_cli("--api-key", KEY, timeout=60)
    assert out.returncode == 2 and "never taken from the command line" in out.stderr
    assert KEY not in out.stderr + out.stdout
    out = run_cli("--api-key-file", "/nonexistent/key", timeout=60)
    assert out.returncode == 2 and "API key file not found: /nonexistent/key" in out.stderr


# --- the bind rule ------------------------------------------------------------------------------

@pytest.mark.parametrize("host, loopback", [
    ("127.0.0.1", True), ("127.8.9.10", True), ("localhost", True), ("LOCALHOST", True), ("::1", True),
    ("::ffff:127.0.0.1", True), ("0.0.0.0", False), ("::", False), ("10.1.2.3", False), ("example.com", False),
])
def test_loopback_hosts(host, loopback) -> None:
    assert is_loopback(host) is loopback


def test_other_hosts_need_a_key_or_insecure() -> None:
    # issue 29 item 11: `--host 0.0.0.0` served every interface without a word
    with pytest.raises(ValueError, match=r"host 0.0.0.0 is reachable from other machines: set an API key"):
        ServeConfig(host="0.0.0.0")
    assert ServeConfig(host="0.0.0.0", api_key=KEY).api_key == KEY
    assert ServeConfig(host="0.0.0.0", insecure=True).insecure
    assert ServeConfig(host="::1").host == "::1"


def test_cli_refuses_an_open_bind_and_warns_with_insecure(tmp_path) -> None:
    # issue 29 item 11: one line, exit 2, before any model loads
    out = run_cli("--host", "0.0.0.0", timeout=60)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [
        "rapidscore serve: error: host 0.0.0.0 is reachable from other machines: set an API key "
        f"(${API_KEY_ENV} or --api-key-file), or pass --insecure to serve without one"]
    # With --insecure it starts (and warns); a model that cannot load then ends it (item 12).
    out = run_cli("--host", "0.0.0.0", "--port", "0", "--insecure", "--model", str(tmp_path), "--json")
    assert "warning: serving on 0.0.0.0 without an API key (--insecure)" in out.stderr
    assert out.returncode == 2 and "the models failed to load" in out.stderr
    out = run_cli("--host", "0.0.0.0", "--port", "0", "--model", str(tmp_path), "--json", env={API_KEY_ENV: KEY})
    assert "warning" not in out.stderr and "the models failed to load" in out.stderr


# --- CORS and /docs -----------------------------------------------------------------------------

def preflight(url: str, origin: str):  # noqa: ANN201 - an httpx.Response
    import httpx

    return httpx.options(f"{url}/v1/bertscore", headers={
        "Origin": origin, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"})


def test_cors_is_off_by_default(serving) -> None:
    # issue 29 item 11
    import httpx

    server = serving(ServeConfig(), ready=True)
    assert "access-control-allow-origin" not in preflight(server.url, "https://app.example.com").headers
    answer = httpx.get(f"{server.url}/health", headers={"Origin": "https://app.example.com"})
    assert "access-control-allow-origin" not in answer.headers


def test_cors_allows_the_listed_origins_only(serving) -> None:
    # issue 29 item 11: an allow-list; the preflight passes before the key check, and a 401 is readable
    import httpx

    server = serving(ServeConfig(cors_origins=("https://app.example.com",), api_key=KEY), ready=True)
    answer = preflight(server.url, "https://app.example.com")
    assert answer.status_code == 200
    assert answer.headers["access-control-allow-origin"] == "https://app.example.com"
    assert "authorization" in answer.headers["access-control-allow-headers"].lower()
    answer = preflight(server.url, "https://evil.example.net")
    assert answer.status_code == 400 and "access-control-allow-origin" not in answer.headers
    answer = httpx.post(f"{server.url}/v1/bertscore", json=BODY, headers={"Origin": "https://app.example.com"})
    assert answer.status_code == 401
    assert answer.headers["access-control-allow-origin"] == "https://app.example.com"


@pytest.mark.parametrize("origins", [["https://app.example.com/"], ["app.example.com"], "https://a.example"])
def test_bad_cors_origins_are_refused(origins) -> None:
    with pytest.raises(ValueError, match="cors_origins"):
        ServeConfig(cors_origins=origins)


def test_cli_flags_and_settings_file_keys(tmp_path, monkeypatch) -> None:
    # issue 29 items 8 and 11: every new setting from flags and from a settings file
    pytest.importorskip("uvicorn", reason="the [serve] extra (uvicorn) is not installed")
    import rapidscore.serve.server as server_module
    from rapidscore.cli import build_parser
    from rapidscore.serve.cli import run

    captured = {}

    def fake_serve(config: ServeConfig, announce: str) -> None:
        captured["config"] = config

    monkeypatch.setattr(server_module, "serve", fake_serve)
    key_file = tmp_path / "key"
    key_file.write_text(KEY)
    args = build_parser().parse_args([
        "serve", "--header-timeout", "2.5", "--body-timeout", "7", "--max-connections", "50",
        "--api-key-file", str(key_file), "--host", "0.0.0.0", "--cors-origin", "https://a.example",
        "--cors-origin", "http://localhost:3000", "--docs", "--max-texts", "300", "--max-tokens", "5000"])
    run(args)
    config = captured["config"]
    assert (config.header_timeout, config.body_timeout, config.max_connections) == (2.5, 7.0, 50)
    assert (config.max_texts, config.max_tokens) == (300, 5000)  # issue 29 item 7: the limits as flags too
    assert config.api_key == KEY and config.docs and not config.insecure
    assert config.cors_origins == ("https://a.example", "http://localhost:3000")
    settings = tmp_path / "serve.json"
    settings.write_text('{"header_timeout": 3, "max_connections": 9, "insecure": true, "host": "0.0.0.0", '
                        '"cors_origins": ["https://b.example"], "docs": true}')
    config = load_config(settings, environ={})
    assert (config.header_timeout, config.max_connections, config.insecure, config.docs) == (3, 9, True, True)
    assert config.cors_origins == ("https://b.example",)
    defaults = ServeConfig()
    assert (defaults.header_timeout, defaults.body_timeout, defaults.max_connections) == (10.0, 30.0, 1000)
    assert (defaults.api_key, defaults.insecure, defaults.cors_origins, defaults.docs) == (None, False, (), False)


@pytest.mark.parametrize("settings, message", [
    ({"header_timeout": 0}, "header_timeout must be a positive number of seconds"),
    ({"body_timeout": float("nan")}, "body_timeout must be a positive number"),
    ({"body_timeout": True}, "body_timeout must be a positive number"),
    ({"max_connections": 0}, "max_connections must be a positive int"),
    ({"insecure": "yes"}, "insecure must be true or false"),
])
def test_bad_connection_settings_name_the_setting(settings, message) -> None:
    with pytest.raises(ValueError, match=message):
        ServeConfig(**settings)


def test_docs_are_off_by_default_and_openapi_stays(serving) -> None:
    # issue 29 item 11: /docs loaded Swagger UI from a CDN (no page offline); off unless --docs
    import httpx

    server = serving(ServeConfig())
    assert httpx.get(f"{server.url}/docs").status_code == 404
    assert httpx.get(f"{server.url}/redoc").status_code == 404
    schema = httpx.get(f"{server.url}/openapi.json").json()
    assert "/v1/bertscore" in schema["paths"]
    server = serving(ServeConfig(docs=True))
    answer = httpx.get(f"{server.url}/docs")
    assert answer.status_code == 200 and "swagger-ui" in answer.text
