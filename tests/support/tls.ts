import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";

/** A CA, a server certificate and a client certificate made with `openssl`, in a fresh temp folder. */
export interface TestCertificates {
  dir: string;
  caFile: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
}

/**
 * Makes the certificates a TLS test needs. The server certificate names only `serverName` (no IP address),
 * so a client that dials 127.0.0.1 verifies it only when it sends that name (SNI / servername).
 */
export function makeCertificates(serverName: string): TestCertificates {
  const dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-tls-"));
  const at = (name: string) => path.join(dir, name);
  const openssl = (...args: string[]) => execFileSync("openssl", args, { stdio: ["ignore", "ignore", "pipe"] });
  openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=Lockscope test CA", "-keyout", at("ca.key"), "-out", at("ca.pem"));
  const issue = (name: string, subject: string, extensions: string) => {
    writeFileSync(at(`${name}.ext`), extensions);
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", at(`${name}.key`), "-out", at(`${name}.csr`));
    openssl("x509", "-req", "-in", at(`${name}.csr`), "-CA", at("ca.pem"), "-CAkey", at("ca.key"), "-CAcreateserial", "-days", "2", "-extfile", at(`${name}.ext`), "-out", at(`${name}.pem`));
  };
  issue("server", `/CN=${serverName}`, `subjectAltName=DNS:${serverName}\nextendedKeyUsage=serverAuth\n`);
  issue("client", "/CN=lockscope-console", "extendedKeyUsage=clientAuth\n");
  return { dir, caFile: at("ca.pem"), serverCert: at("server.pem"), serverKey: at("server.key"), clientCert: at("client.pem"), clientKey: at("client.key") };
}
