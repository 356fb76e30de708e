"""Test certificates made with the `openssl` CLI (Debian 12's 3.0) in a folder: the TLS tests of both ports
(test_tls.py for gRPC, test_https.py for HTTP) and the balancer's TLS variant (test_deploy_lb.py) use the
same set. Also the server flags that put a port on them, and the live files of the reload tests; conftest.py's
`certs` and `live` fixtures hand these out."""

import os
import shutil
import socket
import ssl
import subprocess


def _openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, capture_output=True)


def _key_and_csr(d, name, cn):
    _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + cn, cwd=d)


def _sign(d, name, ca, ext):
    with open(os.path.join(d, name + ".ext"), "w") as f:
        f.write(ext + "\n")
    _openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key", "-CAcreateserial",
             "-days", "2", "-out", name + ".crt", "-extfile", name + ".ext", cwd=d)


def _ca(d, name):
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", name + ".key", "-out", name + ".crt", "-days", "2", "-subj", "/CN=inferd test " + name,
             cwd=d)


def _sign_dated(d, name, ca, ext, start, end):
    """Signs name.csr with `ca` for a validity window in the past, which `openssl x509 -req` (3.0) cannot
    set: `openssl ca` with -startdate/-enddate (YYYYMMDDHHMMSSZ) and a throwaway database."""
    with open(os.path.join(d, name + ".ext"), "w") as f:
        f.write(ext + "\n")
    db = os.path.join(d, name + "_db")
    os.makedirs(db, exist_ok=True)
    open(os.path.join(db, "index.txt"), "w").close()
    with open(os.path.join(db, "serial"), "w") as f:
        f.write("1000\n")
    with open(os.path.join(db, "ca.conf"), "w") as f:
        f.write("[ca]\ndefault_ca=d\n[d]\ndatabase=%s/index.txt\nnew_certs_dir=%s\nserial=%s/serial\n"
                "default_md=sha256\npolicy=p\nunique_subject=no\n[p]\ncommonName=supplied\n" % (db, db, db))
    _openssl("ca", "-batch", "-config", os.path.join(db, "ca.conf"), "-cert", ca + ".crt", "-keyfile", ca + ".key",
             "-in", name + ".csr", "-out", name + ".crt", "-startdate", start, "-enddate", end,
             "-extfile", name + ".ext", "-notext", cwd=d)


SERVER_EXT = "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth"


def make_certs(d):
    """Makes the set in folder d and returns {name: path}: ca, server, client (signed by ca), other_ca
    and other_client (signed by other_ca); server_b and server_c (more server certificates of ca, each
    with its own key and serial, for reloads); expired_server and expired_client (signed by ca, valid
    only in January 2020). Server certificates name localhost and 127.0.0.1."""
    _ca(d, "ca")
    _ca(d, "other_ca")
    _key_and_csr(d, "server", "localhost")
    _sign(d, "server", "ca", SERVER_EXT)
    _key_and_csr(d, "client", "inferd test client")
    _sign(d, "client", "ca", "extendedKeyUsage=clientAuth")
    _key_and_csr(d, "other_client", "inferd test intruder")
    _sign(d, "other_client", "other_ca", "extendedKeyUsage=clientAuth")
    for n in ("server_b", "server_c"):
        _key_and_csr(d, n, "localhost")
        _sign(d, n, "ca", SERVER_EXT)
    _key_and_csr(d, "expired_server", "localhost")
    _sign_dated(d, "expired_server", "ca", SERVER_EXT, "20200101000000Z", "20200102000000Z")
    _key_and_csr(d, "expired_client", "inferd test expired client")
    _sign_dated(d, "expired_client", "ca", "extendedKeyUsage=clientAuth", "20200101000000Z", "20200102000000Z")
    p = lambda f: os.path.join(d, f)
    c = {"dir": d, "ca": p("ca.crt"), "other_ca": p("other_ca.crt"),
         "server_crt": p("server.crt"), "server_key": p("server.key"),
         "client_crt": p("client.crt"), "client_key": p("client.key"),
         "other_client_crt": p("other_client.crt"), "other_client_key": p("other_client.key")}
    for n in ("server_b", "server_c", "expired_server", "expired_client"):
        c[n + "_crt"], c[n + "_key"] = p(n + ".crt"), p(n + ".key")
    return c


# --- serving with them

def server_args(certs, port, mutual=False, crt=None, key=None, bare=False):
    """inferd's flags for TLS on `port` ("grpc" or "http") with the set's server certificate, or crt/key (the
    live files of a reload test); mutual adds client verification against the set's ca. bare: the on flag
    without its value (inferd takes both of Triton's spellings; test_https starts with this one, test_tls
    with "true")."""
    p = "--%s-" % port
    a = ["--strict-readiness", "false", p + "use-ssl"] + ([] if bare else ["true"])
    a += [p + "server-cert", crt or certs["server_crt"], p + "server-key", key or certs["server_key"]]
    if mutual:
        a += [p + "use-ssl-mutual", "true", p + "root-cert", certs["ca"]]
    return a


def install(src_crt, src_key, live):
    """Puts a certificate and key in place of the live files the way a deploy tool would: each written
    beside and renamed over (a reader never sees half a file)."""
    for src, dst in ((src_crt, live["crt"]), (src_key, live["key"])):
        tmp = dst + ".new"
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)


def live_files(d, certs):
    """{crt, key}: live certificate files in folder d, holding the set's server certificate for a start."""
    live = {"crt": os.path.join(d, "live.crt"), "key": os.path.join(d, "live.key")}
    install(certs["server_crt"], certs["server_key"], live)
    return live


BAD_RELOADS = ["garbage_crt", "key_of_another_cert", "expired"]


def install_bad(certs, live, bad):
    """Replaces the live files with a bad set, one of BAD_RELOADS: a certificate file that is not PEM, the
    set's server_c certificate with server_b's key, an expired certificate. Returns what the server's refusal
    says, and which live file it names ("crt" or "key")."""
    if bad == "garbage_crt":
        with open(live["crt"], "w") as f:
            f.write("not a certificate\n")
        return "no valid PEM certificate", "crt"
    if bad == "key_of_another_cert":
        install(certs["server_c_crt"], certs["server_b_key"], live)
        return "is not the private key of the certificate", "key"
    assert bad == "expired", bad
    install(certs["expired_server_crt"], certs["expired_server_key"], live)
    return "expired (notAfter Jan  2 00:00:00 2020 GMT)", "crt"


# --- probing a TLS port

def raw_tls(port, client=None, timeout=10):
    """A raw TLS connection to 127.0.0.1:port offering h2 as a gRPC client does; client=(crt, key)
    presents a client certificate. The server's certificate is not verified: which one comes is the
    question these probes ask."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    if client:
        ctx.load_cert_chain(client[0], client[1])
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        return ctx.wrap_socket(raw)
    except BaseException:
        raw.close()
        raise


def peer_cert_der(port):
    """The certificate the server hands a new connection (DER)."""
    with raw_tls(port) as s:
        return s.getpeercert(binary_form=True)


def der(path):
    """A PEM certificate file's first certificate, DER."""
    with open(path) as f:
        return ssl.PEM_cert_to_DER_cert(f.read())
