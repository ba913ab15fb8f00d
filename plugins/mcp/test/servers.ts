/**
 * The real MCP servers from npm the tests run (pinned in devDependencies), and helpers around them.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import type { McpConfig } from "@musekit/plugin-mcp"
import { afterAll } from "vitest"

const require = createRequire(import.meta.url)
const entry = (pkg: string) => require.resolve(`${pkg}/package.json`).replace(/package\.json$/, "dist/index.js")

/** `@modelcontextprotocol/server-everything` (its `stdio` / `streamableHttp` modes). */
export const everythingEntry = entry("@modelcontextprotocol/server-everything")
/** `@modelcontextprotocol/server-filesystem`. */
export const filesystemEntry = entry("@modelcontextprotocol/server-filesystem")
export const misbehavingEntry = fileURLToPath(new URL("./fixtures/misbehaving.mjs", import.meta.url))

export const stdio = (args: ReadonlyArray<string>, extra: Partial<McpConfig.Server> = {}): McpConfig.Server =>
  ({
    transport: "stdio",
    command: process.execPath,
    args: [...args],
    env: {},
    source: "test config",
    ...extra
  }) as McpConfig.Server

export const everything = (extra: Partial<McpConfig.Server> = {}) => stdio([everythingEntry, "stdio"], extra)
export const filesystem = (root: string) => stdio([filesystemEntry, root])
export const misbehaving = () => stdio([misbehavingEntry])

const made: Array<string> = []
const children: Array<ChildProcess> = []

/** A fresh temporary directory (real path), removed after the test file. */
export const tmpDir = (prefix = "muse-mcp-"): string => {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), prefix)))
  made.push(dir)
  return dir
}

afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill("SIGKILL")
  for (const dir of made) fs.rmSync(dir, { recursive: true, force: true })
})

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const srv = net.createServer()
    srv.on("error", reject)
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as net.AddressInfo).port
      srv.close(() => resolve(port))
    })
  })

/** server-everything in Streamable HTTP mode, reached on 127.0.0.1; resolves once it listens. */
export const startHttpEverything = async (): Promise<{ url: string; child: ChildProcess }> => {
  const port = await freePort()
  const child = spawn(process.execPath, [everythingEntry, "streamableHttp"], {
    env: { ...process.env, PORT: String(port) },
    stdio: ["ignore", "ignore", "pipe"]
  })
  children.push(child)
  await new Promise<void>((resolve, reject) => {
    let err = ""
    child.stderr!.on("data", (c: Buffer) => {
      err += c.toString()
      if (err.includes("listening on port")) resolve()
    })
    child.on("exit", (code) => reject(new Error(`server-everything exited (${code}): ${err}`)))
  })
  return { url: `http://127.0.0.1:${port}/mcp`, child }
}

/** Wait until `check` holds (polling), or fail after `ms`. */
export const waitFor = async (check: () => boolean | Promise<boolean>, ms = 20_000, what = "a condition") => {
  const until = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}
