"""TLS material: the checks `serve --tls-cert/--tls-key` makes before it listens, what replicas need to trust
the server where they call back to it, and a local CA with a server certificate for one machine
(`trainworks admin tls init`).

- The server's certificate file holds its certificate first, then any chain; the key file its private key,
  unencrypted (PEM both). They are read and matched here, so that a wrong file is one clear message at
  start-up, and loaded as the TLS library will load them (uvicorn's `ssl.SSLContext.load_cert_chain`).
- The server knows its CA when the chain ends in a self-signed root (the helper's server.pem does: the
  server certificate, then the CA), or when the certificate is itself self-signed. Replicas that call back
  (STORAGE_EMULATOR_HOST is then https://) get a bundle of the system's roots and that CA in their run
  folder, the one folder a sandboxed replica surely sees, named by the variables Python's ssl (urllib,
  aiohttp, httpx), requests, curl, gRPC and Node read. A certificate from a CA the system already trusts
  needs nothing: no bundle is written.
- The helper's CA is reused when it exists (every client that trusts it keeps working); the server
  certificate is issued again only when it is missing, no longer valid within 30 days, not the CA's, or
  lacks a name asked for.
"""

from __future__ import annotations

import datetime
import functools
import ipaddress
import os
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes, PrivateKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Where a replica finds the trust bundle, in its own run folder.
REPLICA_TRUST_FILE = "trainworks-ca-bundle.pem"
# The variables that name a CA bundle for the clients a replica may call back with; each replaces that
# client's default roots (the bundle holds them too), except Node's, which adds to them.
TRUST_VARIABLES = (
    "SSL_CERT_FILE",  # Python's ssl: urllib, aiohttp (gcsfs), httpx
    "REQUESTS_CA_BUNDLE",  # requests: google-cloud-storage, the REST transports
    "CURL_CA_BUNDLE",  # curl
    "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",  # gRPC (C core and grpc-js)
    "NODE_EXTRA_CA_CERTS",  # Node's https
)
DEFAULT_NAMES = ("localhost", "127.0.0.1", "::1")
CA_DAYS = 3650
SERVER_DAYS = 397  # what browsers and macOS accept of a server certificate
RENEW_BEFORE = datetime.timedelta(days=30)


class TlsError(ValueError):
    """TLS material that cannot be used, and which file it is."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(message)
        self.path = path


# ------------------------------------------------------------------------------------------ the server
@dataclass(frozen=True)
class ServerTls:
    """The server's certificate chain and key (checked to belong together), for HTTPS and gRPC."""

    cert: Path
    key: Path
    names: tuple[str, ...]  # the certificate's DNS names and IP addresses
    expires: datetime.datetime
    # The root the server's chain ends in, as PEM, when the server knows it; None: the system trusts it.
    ca: bytes | None

    def chain_pem(self) -> bytes:
        return self.cert.read_bytes()

    def key_pem(self) -> bytes:
        return self.key.read_bytes()


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise TlsError(path, f"cannot read {path}: {exc.strerror or exc}") from None


def _certificates(path: Path) -> list[x509.Certificate]:
    data = _read(path)
    try:
        return x509.load_pem_x509_certificates(data)
    except ValueError:
        raise TlsError(path, f"{path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)") from None


def _private_key(path: Path) -> PrivateKeyTypes:
    data = _read(path)
    try:
        return serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise TlsError(
            path, f"{path} is encrypted with a passphrase: give the key unencrypted (openssl pkey -in KEY)"
        ) from None
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise TlsError(path, f"{path} holds no usable PEM private key ({exc})") from None


def _public(key: PrivateKeyTypes | x509.Certificate) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _self_signed(cert: x509.Certificate) -> bool:
    if cert.issuer != cert.subject:
        return False
    try:
        cert.verify_directly_issued_by(cert)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _names(cert: x509.Certificate) -> tuple[str, ...]:
    try:
        alt = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return ()
    return (*alt.get_values_for_type(x509.DNSName), *map(str, alt.get_values_for_type(x509.IPAddress)))


def load_server_tls(cert: Path, key: Path) -> ServerTls:
    """The server's TLS files, checked: readable, PEM, the key the certificate's, loadable by Python's ssl.
    Raises TlsError naming the file at fault."""
    chain = _certificates(cert)
    private = _private_key(key)
    if _public(private) != _public(chain[0]):
        raise TlsError(
            key, f"{key} is not the private key of the certificate in {cert} (the first one there)"
        )
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        raise TlsError(cert, f"Python's ssl refuses {cert} with {key}: {exc.reason or exc}") from None
    root = chain[-1] if _self_signed(chain[-1]) else None
    ca = root.public_bytes(serialization.Encoding.PEM) if root is not None else None
    return ServerTls(cert.resolve(), key.resolve(), _names(chain[0]), chain[0].not_valid_after_utc, ca)


# ------------------------------------------------------------------------------------------ replicas
@functools.cache
def _system_roots() -> bytes:
    """The roots this host's clients trust by default: OpenSSL's bundle (as SSL_CERT_FILE may name it),
    else certifi's."""
    cafile = ssl.get_default_verify_paths().cafile
    if cafile:
        try:
            return Path(cafile).read_bytes()
        except OSError:
            pass
    try:
        import certifi
    except ImportError:
        return b""
    return Path(certifi.where()).read_bytes()


def trust_bundle(ca: bytes) -> bytes:
    """The system's roots and `ca`, one PEM bundle: trusting the server must not cost the rest of the web."""
    roots = _system_roots()
    return roots + (b"" if roots.endswith(b"\n") or not roots else b"\n") + ca


def replica_trust_env(tls: ServerTls | None, run_dir: Path) -> dict[str, str]:
    """The variables that make a replica trust the server's CA, its bundle written into `run_dir`; nothing
    when the server has no TLS or its CA is one the system trusts already."""
    if tls is None or tls.ca is None:
        return {}
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / REPLICA_TRUST_FILE
    path.write_bytes(trust_bundle(tls.ca))
    return dict.fromkeys(TRUST_VARIABLES, str(path))


# ------------------------------------------------------------------------------------------ the local CA
@dataclass(frozen=True)
class LocalCa:
    """The files of `admin tls init`, and what it did."""

    folder: Path
    ca_created: bool
    server_issued: bool
    names: tuple[str, ...]

    @property
    def ca(self) -> Path:
        return self.folder / "ca.pem"

    @property
    def ca_key(self) -> Path:
        return self.folder / "ca-key.pem"

    @property
    def server(self) -> Path:
        return self.folder / "server.pem"

    @property
    def server_key(self) -> Path:
        return self.folder / "server-key.pem"

    @property
    def bundle(self) -> Path:
        return self.folder / "ca-bundle.pem"


def _write(path: Path, data: bytes, private: bool = False) -> None:
    """Written whole or not at all (a temporary file renamed); a private key readable by its owner only."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.unlink(missing_ok=True)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if private else 0o644)
    with os.fdopen(descriptor, "wb") as out:
        out.write(data)
    os.replace(temporary, path)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _general_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    now: datetime.datetime,
    not_after: datetime.datetime,
) -> x509.CertificateBuilder:
    """A new certificate of `key`, valid from a few minutes ago (a client's clock a little behind) on."""
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(not_after)
    )


def _key_usage(*, signs_certificates: bool) -> x509.KeyUsage:
    """The CA's key signs certificates and CRLs, nothing else; the server's signs its TLS handshakes."""
    return x509.KeyUsage(
        digital_signature=not signs_certificates,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=signs_certificates,
        crl_sign=signs_certificates,
        encipher_only=False,
        decipher_only=False,
    )


def _new_ca(now: datetime.datetime) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Trainworks"),
            x509.NameAttribute(NameOID.COMMON_NAME, f"Trainworks local CA ({os.uname().nodename})"),
        ]
    )
    identifier = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        _builder(subject, subject, key, now, now + datetime.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(signs_certificates=True), critical=True)
        .add_extension(identifier, critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _new_server(
    ca: x509.Certificate,
    ca_key: CertificateIssuerPrivateKeyTypes,
    names: Sequence[str],
    now: datetime.datetime,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    ca_identifier = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    not_after = min(now + datetime.timedelta(days=SERVER_DAYS), ca.not_valid_after_utc)
    cert = (
        _builder(subject, ca.subject, key, now, not_after)
        .add_extension(x509.SubjectAlternativeName([_general_name(n) for n in names]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(signs_certificates=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_identifier), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def _load_ca(files: LocalCa) -> tuple[x509.Certificate, CertificateIssuerPrivateKeyTypes] | None:
    """The existing CA, or None when there is none; TlsError when half of it, or something else, is there."""
    if not files.ca.exists() and not files.ca_key.exists():
        return None
    for path in (files.ca, files.ca_key):
        if not path.exists():
            other = files.ca_key if path == files.ca else files.ca
            raise TlsError(path, f"{other} is there but {path} is not: remove {other} to make a new CA")
    cert = _certificates(files.ca)[0]
    key = _private_key(files.ca_key)
    if _public(key) != _public(cert):
        raise TlsError(files.ca_key, f"{files.ca_key} is not the private key of {files.ca}")
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise TlsError(files.ca_key, f"{files.ca_key} is no EC or RSA key: it cannot sign the certificate")
    try:
        cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
    except x509.ExtensionNotFound:
        raise TlsError(files.ca, f"{files.ca} is no CA this helper made (it has no key identifier)") from None
    return cert, key


def _server_current(
    files: LocalCa, ca: x509.Certificate, names: Sequence[str], now: datetime.datetime
) -> bool:
    """Whether the existing server certificate can stay: the CA's, its key's, valid a while, every name."""
    if not (files.server.exists() and files.server_key.exists()):
        return False
    try:
        chain = _certificates(files.server)
        key = _private_key(files.server_key)
        chain[0].verify_directly_issued_by(ca)
    except (TlsError, ValueError, TypeError, InvalidSignature):
        return False
    wanted = {str(_general_name(n).value) for n in names}
    return (
        _public(key) == _public(chain[0])
        and chain[0].not_valid_after_utc - now > RENEW_BEFORE
        and wanted <= set(_names(chain[0]))
    )


def init_local_ca(folder: Path, extra_names: Sequence[str] = ()) -> LocalCa:
    """Make (or keep) a local CA and a server certificate for localhost, 127.0.0.1, ::1 and `extra_names`
    in `folder`: ca.pem and ca-key.pem, server.pem (the server certificate, then the CA) and
    server-key.pem (keys 0600), and ca-bundle.pem (the system's roots and the CA)."""
    names = tuple(dict.fromkeys([*DEFAULT_NAMES, *extra_names]))
    for name in names:
        if not name or "/" in name or " " in name:
            raise TlsError(folder, f"{name!r} is no host name or IP address")
    folder = folder.expanduser().resolve()
    folder.mkdir(parents=True, exist_ok=True)
    files = LocalCa(folder, ca_created=False, server_issued=False, names=names)
    now = datetime.datetime.now(datetime.UTC)
    found = _load_ca(files)
    created = found is None
    if found is None:
        ca_cert, new_key = _new_ca(now)
        _write(files.ca_key, _key_pem(new_key), private=True)
        _write(files.ca, ca_cert.public_bytes(serialization.Encoding.PEM))
        found = ca_cert, new_key
    ca_cert, ca_key = found
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    issued = not _server_current(files, ca_cert, names, now)
    if issued:
        server_cert, server_key = _new_server(ca_cert, ca_key, names, now)
        _write(files.server_key, _key_pem(server_key), private=True)
        _write(files.server, server_cert.public_bytes(serialization.Encoding.PEM) + ca_pem)
    _write(files.bundle, trust_bundle(ca_pem))
    return LocalCa(folder, ca_created=created, server_issued=issued, names=names)
