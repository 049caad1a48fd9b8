import { describe, expect, it } from "vitest";
import { parseReplicationInfo, readReplicationInfo } from "@/lib/locks/replication";

describe("INFO replication", () => {
  it("gives a primary's replicas with the bytes each has not acknowledged", () => {
    const info = [
      "# Replication",
      "role:master",
      "connected_slaves:2",
      "slave0:ip=127.0.0.1,port=41001,state=online,offset=1500,lag=0",
      "slave1:ip=127.0.0.1,port=41002,state=wait_bgsave,offset=900,lag=1",
      "master_repl_offset:1600",
      "",
    ].join("\r\n");
    expect(parseReplicationInfo(info)).toEqual({
      role: "master",
      offset: 1600,
      replicas: [
        { address: "127.0.0.1:41001", state: "online", offset: 1500, lagBytes: 100 },
        { address: "127.0.0.1:41002", state: "wait_bgsave", offset: 900, lagBytes: 700 },
      ],
    });
  });

  it("gives a replica's offset and link, and nothing for an answer it cannot read", () => {
    expect(parseReplicationInfo("role:slave\r\nmaster_link_status:down\r\nslave_repl_offset:42\r\n")).toEqual({ role: "replica", offset: 42, replicas: [], linkUp: false });
    expect(parseReplicationInfo("role:slave\r\nmaster_host:10.0.0.7\r\nmaster_port:6380\r\nmaster_link_status:up\r\nslave_repl_offset:42\r\n")).toEqual({
      role: "replica",
      offset: 42,
      replicas: [],
      linkUp: true,
      primary: "10.0.0.7:6380",
    });
    expect(parseReplicationInfo("role:slave\r\nmaster_host:::1\r\nmaster_port:6380\r\n").primary).toBe("[::1]:6380");
    expect(parseReplicationInfo("")).toEqual({ role: null, offset: null, replicas: [] });
  });

  it("says what a node is: a primary, a replica of host:port with its link up or down, read-only or writable", () => {
    const primary = ["# Replication", "role:master", "connected_slaves:1", "slave0:ip=127.0.0.1,port=41001,state=online,offset=10,lag=0", "master_repl_offset:10", ""].join("\r\n");
    expect(readReplicationInfo(primary).role).toEqual({ kind: "primary" });

    const replica = (link: string, readOnly: string) =>
      ["# Replication", "role:slave", "master_host:10.0.0.7", "master_port:6380", `master_link_status:${link}`, "slave_repl_offset:42", `slave_read_only:${readOnly}`, "connected_slaves:0", ""].join("\r\n");
    expect(readReplicationInfo(replica("up", "1")).role).toEqual({ kind: "replica", primary: "10.0.0.7:6380", linkUp: true, readOnly: true });
    expect(readReplicationInfo(replica("down", "1")).role).toEqual({ kind: "replica", primary: "10.0.0.7:6380", linkUp: false, readOnly: true });
    // `replica-read-only no`: it takes writes, which never reach its primary; still a replica.
    expect(readReplicationInfo(replica("up", "0")).role).toEqual({ kind: "replica", primary: "10.0.0.7:6380", linkUp: true, readOnly: false });
    // An older or trimmed reply that names neither its primary nor whether it is read-only.
    expect(readReplicationInfo("role:slave\r\n").role).toEqual({ kind: "replica", primary: null, linkUp: false, readOnly: null });
    // The replication read from the same reply agrees with the role.
    expect(readReplicationInfo(replica("down", "0")).state).toEqual({ role: "replica", offset: 42, replicas: [], linkUp: false, primary: "10.0.0.7:6380" });
  });

  it("gives an unknown role, saying why, for a reply that names none it knows, rather than throw", () => {
    for (const info of ["", "\r\n", "ERR unknown command 'INFO'", "role\r\nmaster", ":master", "role:\r\n"]) {
      expect(readReplicationInfo(info)).toEqual({ role: { kind: "unknown", why: "the reply names no role" }, state: { role: null, offset: null, replicas: [] } });
    }
    expect(readReplicationInfo("# Replication\r\nrole:sentinel\r\n").role).toEqual({ kind: "unknown", why: "the reply names the role `sentinel`, neither master nor slave" });
  });
});
