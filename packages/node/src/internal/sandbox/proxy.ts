/**
 * The network allow-list of the sandbox: a small HTTP proxy in the muse process that opens
 * connections only to listed hosts (`CONNECT host:port` for HTTPS and anything tunnelled, plain
 * `GET http://host/…` requests), and the channel that carries it into a sandbox that has no
 * network of its own.
 *
 * On Linux the sandbox gets one end of a socket pair (an inherited file descriptor, so nothing in
 * the sandbox has to create a unix socket) and runs a tiny forwarder (`FORWARDER`, run by node) that
 * listens on 127.0.0.1 inside the sandbox's network namespace, sets `HTTP(S)_PROXY` for the
 * command, and multiplexes its connections over that descriptor: frames of
 * `[type u8][id u32][length u32][bytes]` (1 open, 2 data, 3 end). On macOS the proxy listens on a
 * local port that the profile lets the command reach.
 *
 * @example
 * ```ts
 * const allowed = hostMatcher(["registry.npmjs.org", "*.github.com"])
 * serveChannel(child.stdio[4] as Duplex, { allowed, refused: (h) => blocked.push(h) })
 * ```
 */
import * as net from "node:net"
import { Duplex } from "node:stream"

/** `host` or `*.domain` (subdomains only) or `host:port`; hosts compare case-insensitively. */
export const hostMatcher = (patterns: ReadonlyArray<string>) => {
  const rules = patterns.map((p) => {
    const t = p.trim().toLowerCase()
    const m = /^(.*?)(?::(\d+))?$/.exec(t)!
    return { host: m[1]!.replace(/^\[|\]$/g, ""), port: m[2] === undefined ? undefined : Number(m[2]) }
  })
  return (host: string, port: number): boolean => {
    const h = host
      .toLowerCase()
      .replace(/^\[|\]$/g, "")
      .replace(/\.$/, "")
    return rules.some(
      (r) =>
        (r.port === undefined || r.port === port) &&
        (r.host === h || (r.host.startsWith("*.") && h.endsWith(r.host.slice(1)) && h.length > r.host.length - 1))
    )
  }
}

export interface ProxyOptions {
  readonly allowed: (host: string, port: number) => boolean
  /** Told of every refused destination (`host:port`). */
  readonly refused?: ((destination: string) => void) | undefined
  /** How to open an upstream connection (tests); default `net.connect`. */
  readonly connect?: ((port: number, host: string) => net.Socket) | undefined
}

const MAX_HEAD = 64 * 1024

const refuse = (client: Duplex, status: string, why: string) => {
  const body = `blocked by the sandbox: ${why}\n`
  client.end(
    `HTTP/1.1 ${status}\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nX-Muse-Sandbox: blocked\r\nConnection: close\r\n\r\n${body}`
  )
}

/** Parse `host:port` (with `[v6]:port`). */
const splitHostPort = (s: string, defaultPort: number): { host: string; port: number } | undefined => {
  const m = /^\[([^\]]+)\](?::(\d+))?$/.exec(s) ?? /^([^:/\s]+)(?::(\d+))?$/.exec(s)
  if (!m) return undefined
  const port = m[2] === undefined ? defaultPort : Number(m[2])
  if (!Number.isInteger(port) || port < 1 || port > 65535) return undefined
  return { host: m[1]!, port }
}

/** Serve one client connection of the proxy. */
export const handleClient = (client: Duplex, options: ProxyOptions): void => {
  let head: Buffer = Buffer.alloc(0)
  const connect = options.connect ?? ((port: number, host: string) => net.connect(port, host))
  const onData = (chunk: Buffer) => {
    head = Buffer.concat([head, chunk])
    const end = head.indexOf("\r\n\r\n")
    if (end === -1) {
      if (head.length > MAX_HEAD) {
        client.off("data", onData)
        refuse(client, "431 Request Header Fields Too Large", "request head too large")
      }
      return
    }
    client.off("data", onData)
    client.pause()
    const text = head.subarray(0, end).toString("latin1")
    const rest = head.subarray(end + 4)
    const [line, ...headers] = text.split("\r\n")
    const m = /^([A-Z]+) (\S+) (HTTP\/1\.[01])$/.exec(line ?? "")
    if (!m) return refuse(client, "400 Bad Request", "not an HTTP proxy request")
    const [, method, target, version] = m
    let dest: { host: string; port: number } | undefined
    let forward: Buffer | undefined
    if (method === "CONNECT") dest = splitHostPort(target!, 443)
    else {
      let url: URL | undefined
      try {
        url = new URL(target!)
      } catch {}
      if (url?.protocol !== "http:") return refuse(client, "400 Bad Request", `${target} is not an http:// URL`)
      dest = { host: url.hostname.replace(/^\[|\]$/g, ""), port: url.port === "" ? 80 : Number(url.port) }
      const kept = headers.filter((h) => !/^proxy-/i.test(h))
      forward = Buffer.concat([
        Buffer.from(`${method} ${url.pathname}${url.search} ${version}\r\n${kept.join("\r\n")}\r\n\r\n`, "latin1"),
        rest
      ])
    }
    if (!dest) return refuse(client, "400 Bad Request", `cannot read the destination ${target}`)
    const where = `${dest.host}:${dest.port}`
    if (!options.allowed(dest.host, dest.port)) {
      options.refused?.(where)
      return refuse(client, "403 Forbidden", `network connection to ${where} (not in the sandbox's allowed hosts)`)
    }
    const upstream = connect(dest.port, dest.host)
    upstream.on("error", (e) => {
      if (!client.destroyed) refuse(client, "502 Bad Gateway", `${where}: ${e.message}`)
    })
    upstream.once("connect", () => {
      if (method === "CONNECT") {
        client.write("HTTP/1.1 200 Connection Established\r\n\r\n")
        if (rest.length > 0) upstream.write(rest)
      } else upstream.write(forward!)
      client.pipe(upstream)
      upstream.pipe(client)
      client.resume()
    })
    client.on("error", () => upstream.destroy())
    client.on("close", () => upstream.destroy())
  }
  client.on("data", onData)
  client.on("error", () => {})
}

const OPEN = 1
const DATA = 2
const END = 3

/**
 * Serve the proxy over a multiplexed channel (the muse end of the sandbox's socket pair): each
 * connection the forwarder accepts becomes a client of `handleClient`.
 */
export const serveChannel = (channel: Duplex, options: ProxyOptions): void => {
  const streams = new Map<number, Duplex>()
  const send = (type: number, id: number, data?: Buffer) => {
    if (channel.destroyed || !channel.writable) return
    const h = Buffer.alloc(9)
    h.writeUInt8(type, 0)
    h.writeUInt32BE(id, 1)
    h.writeUInt32BE(data?.length ?? 0, 5)
    channel.write(data ? Buffer.concat([h, data]) : h)
  }
  let buf: Buffer = Buffer.alloc(0)
  channel.on("data", (chunk: Buffer) => {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk])
    while (buf.length >= 9) {
      const len = buf.readUInt32BE(5)
      if (buf.length < 9 + len) break
      const type = buf.readUInt8(0)
      const id = buf.readUInt32BE(1)
      const data = buf.subarray(9, 9 + len)
      buf = buf.subarray(9 + len)
      if (type === OPEN && !streams.has(id)) {
        const s = new Duplex({
          read() {},
          write(c: Buffer, _e, cb) {
            send(DATA, id, c)
            cb()
          },
          final(cb) {
            send(END, id)
            cb()
          }
        })
        s.on("close", () => streams.delete(id))
        streams.set(id, s)
        handleClient(s, options)
      } else if (type === DATA) streams.get(id)?.push(Buffer.from(data))
      else if (type === END) {
        const s = streams.get(id)
        s?.push(null)
        s?.destroy()
        streams.delete(id)
      }
    }
  })
  const closeAll = () => {
    for (const s of streams.values()) s.destroy()
    streams.clear()
  }
  channel.on("error", closeAll)
  channel.on("close", closeAll)
}

/**
 * The forwarder the sandbox runs with node (`node -e FORWARDER fd command…`): it listens on
 * 127.0.0.1 inside the sandbox, runs the command with `HTTP(S)_PROXY` pointing there, carries each
 * connection over the inherited descriptor, and exits as the command does.
 */
/**
 * The inside end of the channel (node, no imports of its own): `forward(fd, ready)` listens on
 * 127.0.0.1, carries each connection over descriptor `fd`, and calls `ready(url, close)` with the
 * proxy URL once it listens. Shared by `FORWARDER` and the long-lived sandbox's supervisor.
 */
export const FORWARD = String.raw`const forward = (fd, ready) => {
  const net = require("net")
  const ch = new net.Socket({ fd, readable: true, writable: true })
  const conns = new Map(); let next = 1, buf = Buffer.alloc(0)
  const send = (t, id, d) => { const h = Buffer.alloc(9); h.writeUInt8(t, 0); h.writeUInt32BE(id, 1); h.writeUInt32BE(d ? d.length : 0, 5); ch.write(d ? Buffer.concat([h, d]) : h) }
  ch.on("data", (c) => { buf = Buffer.concat([buf, c]); while (buf.length >= 9) { const n = buf.readUInt32BE(5); if (buf.length < 9 + n) break; const t = buf[0], id = buf.readUInt32BE(1), d = buf.subarray(9, 9 + n); buf = buf.subarray(9 + n); const s = conns.get(id); if (!s) continue; if (t === 2) s.write(Buffer.from(d)); else if (t === 3) { s.end(); conns.delete(id) } } })
  ch.on("error", () => {})
  const server = net.createServer((s) => { const id = next++; conns.set(id, s); send(1, id); s.on("data", (d) => send(2, id, d)); s.on("end", () => { if (conns.delete(id)) send(3, id) }); s.on("close", () => { if (conns.delete(id)) send(3, id) }); s.on("error", () => {}) })
  server.listen(0, "127.0.0.1", () => ready("http://127.0.0.1:" + server.address().port, () => { try { ch.destroy() } catch {} }))
}
const proxyEnvFor = (url) => ({ HTTP_PROXY: url, HTTPS_PROXY: url, http_proxy: url, https_proxy: url, ALL_PROXY: url, all_proxy: url, npm_config_proxy: url, npm_config_https_proxy: url })
`

export const FORWARDER = String.raw`"use strict"
${FORWARD}
const { spawn } = require("child_process")
const argv = process.argv.slice(2)
forward(Number(process.argv[1]), (url, close) => {
  const env = Object.assign({}, process.env, proxyEnvFor(url))
  delete env.NO_PROXY; delete env.no_proxy
  const child = spawn(argv[0], argv.slice(1), { stdio: "inherit", env })
  const quit = (code) => { close(); process.exit(code) }
  child.on("error", (e) => { process.stderr.write(argv[0] + ": " + e.message + "\n"); quit(127) })
  child.on("exit", (code, sig) => quit(code === null ? 128 + (require("os").constants.signals[sig] || 9) : code))
})
`
