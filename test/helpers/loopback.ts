// Tests and benches send nothing off this machine: every third-party default of the configuration
// (git host, FCM, the resolver setting's name servers, the ACME directory, the code-server
// installer) points at the discard port on loopback, where nothing listens, so a call that a test
// did not point at its own stand-in is refused at once instead of reaching the internet.

/** The discard port: nothing listens on it. */
export const CLOSED = '127.0.0.1:9';

export const LOOPBACK_DEFAULTS: Record<string, string> = {
  GIT_API_URL: `http://${CLOSED}`,
  FCM_API_URL: `http://${CLOSED}`,
  DNS_CLOUDFLARE_SERVERS: CLOSED,
  DNS_GOOGLE_SERVERS: CLOSED,
  ACME_CA_URL: `http://${CLOSED}/directory`,
  CODE_SERVER_INSTALL_CMD: `curl -fsS http://${CLOSED}/install.sh | sh`,
};
