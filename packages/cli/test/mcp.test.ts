import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import { beforeAll, describe, expect, it } from "vitest"
import { ensureBuilt, muse, readLog, type Sandbox, sandbox, writeScript } from "./support/cli.js"

beforeAll(() => ensureBuilt(), 240_000)

// the real server from npm, as the MCP plugin's tests pin it
const everythingEntry = createRequire(new URL("../../../plugins/mcp/package.json", import.meta.url))
  .resolve("@modelcontextprotocol/server-everything/package.json")
  .replace(/package\.json$/, "dist/index.js")

const userMcp = (sb: Sandbox, servers: Record<string, unknown>) => {
  const dir = path.join(sb.env.XDG_CONFIG_HOME!, "muse")
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, "mcp.json"), JSON.stringify({ mcpServers: servers }, null, 2))
}

const script = (sb: Sandbox) =>
  writeScript(sb, "mcp", {
    replies: [
      {
        when: "mcp",
        steps: [
          { text: "Asking the server.", tools: [{ name: "mcp__everything__echo", params: { message: "from muse" } }] },
          { tools: [{ name: "mcp__everything__get-sum", params: { a: 20, b: 22 } }] },
          { text: "The server answered." }
        ]
      }
    ]
  })

/** The modules `file` loads when it is loaded (its static imports, transitively), in dist/. */
const staticGraph = (dir: string, file: string, seen = new Set<string>()): Set<string> => {
  if (seen.has(file)) return seen
  seen.add(file)
  const text = fs.readFileSync(path.join(dir, file), "utf8")
  for (const m of text.matchAll(/^import\s[^;]*?from\s*"\.\/([^"]+)"|^import\s*"\.\/([^"]+)"/gm)) {
    staticGraph(dir, (m[1] ?? m[2])!, seen)
  }
  return seen
}

describe("muse with MCP servers", () => {
  it("the MCP and ACP SDKs are not loaded with the CLI: only a session with a server, or muse acp, imports them", () => {
    const dist = path.join(path.dirname(new URL(import.meta.url).pathname), "..", "dist")
    const main = fs.readdirSync(dist).find((f) => /^main-[A-Z0-9]+\.js$/.test(f))!
    const loaded = [...staticGraph(dist, main)]
    expect(loaded.length).toBeGreaterThan(1)
    for (const f of loaded) {
      const text = fs.readFileSync(path.join(dist, f), "utf8")
      expect(text.includes("StdioClientTransport"), `${f} holds the MCP SDK`).toBe(false)
      expect(text.includes("AjvJsonSchemaValidator"), `${f} holds the MCP SDK's validator`).toBe(false)
      expect(text.includes("session/request_permission"), `${f} holds the ACP SDK`).toBe(false)
    }
    // and they are in the build, in chunks of their own
    const all = fs.readdirSync(dist).filter((f) => f.endsWith(".js"))
    expect(all.some((f) => fs.readFileSync(path.join(dist, f), "utf8").includes("StdioClientTransport"))).toBe(true)
  })

  it("a user's mcp.json in Claude Code's shape: tools called in a session, replay --verify without the server", () => {
    const sb = sandbox()
    userMcp(sb, { everything: { type: "stdio", command: process.execPath, args: [everythingEntry, "stdio"] } })
    const r = muse(["run", "use the mcp server", "--script", script(sb), "--output-format", "json"], { sb })
    expect(r.code, r.stderr).toBe(0)
    const out = JSON.parse(r.stdout)
    expect(out).toMatchObject({ status: "completed", text: "The server answered." })
    const events = readLog(sb, out.session)
    const started = events[0].data.config
    expect(started.plugins).toContain("mcp")
    expect(started.discovered.mcp.servers[0]).toMatchObject({ name: "everything", status: "connected" })
    const results = events.filter((e) => e.type === "tool.completed").map((e) => [e.data.tool, e.data.result])
    expect(results).toEqual([
      ["mcp__everything__echo", { text: "Echo: from muse" }],
      ["mcp__everything__get-sum", { text: "The sum of 20 and 22 is 42." }]
    ])

    // the server is gone from the config and from the machine's view: the replay needs neither
    fs.rmSync(path.join(sb.env.XDG_CONFIG_HOME!, "muse", "mcp.json"))
    const replay = muse(["replay", out.session, "--verify"], { sb })
    expect(replay.code, replay.stderr).toBe(0)
    expect(replay.stdout).toContain("mcp__everything__echo")
  })

  it("a server that cannot start is named with the reason; the session goes on with the others", () => {
    const sb = sandbox()
    userMcp(sb, {
      everything: { command: process.execPath, args: [everythingEntry, "stdio"] },
      broken: { command: "muse-test-no-such-server", args: [] },
      "bad name": { command: "x" }
    })
    const r = muse(["run", "use the mcp server", "--script", script(sb)], { sb })
    expect(r.code, r.stderr).toBe(0)
    expect(r.stderr).toContain(
      'MCP server "broken" could not be started: the command "muse-test-no-such-server" was not found'
    )
    expect(r.stderr).toContain('server name "bad name" must be 1 to 64 letters')
    expect(r.stdout).toContain("The server answered.")
  })

  it("a folder's own .muse/mcp.json starts only in a trusted folder", () => {
    const sb = sandbox()
    const marker = path.join(sb.root, "server-started")
    fs.mkdirSync(path.join(sb.root, ".muse"), { recursive: true })
    fs.writeFileSync(
      path.join(sb.root, ".muse", "mcp.json"),
      JSON.stringify({
        mcpServers: {
          repo: {
            command: process.execPath,
            args: ["-e", `require("fs").writeFileSync(${JSON.stringify(marker)}, "")`]
          }
        }
      })
    )
    const hi = writeScript(sb, "hi", { steps: [{ text: "hi" }] })
    const r = muse(["run", "hello", "--script", hi], { sb })
    expect(r.code, r.stderr).toBe(0)
    expect(r.stderr).toMatch(
      /this folder's own settings are not used \(\.muse\/mcp\.json\): this folder is not trusted/
    )
    expect(fs.existsSync(marker)).toBe(false)
    // trusted (here for one run), the folder's server is started
    const trusted = muse(["run", "hello", "--script", hi, "--trust"], { sb })
    expect(trusted.code, trusted.stderr).toBe(0)
    expect(fs.existsSync(marker)).toBe(true)
    expect(trusted.stderr).toContain('MCP server "repo" could not be started: it exited before it answered')
  })
})
