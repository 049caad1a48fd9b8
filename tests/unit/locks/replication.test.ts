import { describe, expect, it } from "vitest";
import { parseReplicationInfo } from "@/lib/locks/replication";

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
});
