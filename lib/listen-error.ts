/** A wrong value's line, as the launcher prints it: the variable, what it held, what is expected and why it failed. */
export function invalidLine(variable: string, value: string, expected: string, detail: string): string {
  return `${variable}=${JSON.stringify(value)} is invalid: expected ${expected} (${detail}).`;
}

/**
 * The line the launcher stops with when it cannot listen on HOST:PORT, naming the variable to change (the
 * system's own message names an address and a port, never what set them).
 */
export function listenFailure(error: { code?: string | undefined; message: string }, host: string, port: number): string {
  switch (error.code) {
    case "EADDRINUSE":
      return `port ${port} on ${host} is in use: set PORT to a free port.`;
    case "EADDRNOTAVAIL":
      return `HOST=${host} is not an address of this machine: set HOST, e.g. 127.0.0.1.`;
    // Linux lets only root, or a process with CAP_NET_BIND_SERVICE, listen below net.ipv4.ip_unprivileged_port_start
    // (1024 unless changed); the container runs as an unprivileged user.
    case "EACCES":
      return invalidLine(
        "PORT",
        String(port),
        port < 1024
          ? "a port this user may listen on: 1024 or above (below 1024 only root or a process with CAP_NET_BIND_SERVICE may listen; serve on e.g. 3000 and map or proxy the low port to it)"
          : "a port this user may listen on",
        error.message,
      );
    // A name the resolver does not know (a typo, a container's name outside its network).
    case "ENOTFOUND":
    case "EAI_AGAIN":
    case "EAI_NONAME":
    case "EAI_FAIL":
      return invalidLine("HOST", host, "a hostname or IP address of this machine to bind, e.g. 127.0.0.1", error.message);
    default:
      return `cannot listen on ${host}:${port}: ${error.message}`;
  }
}
