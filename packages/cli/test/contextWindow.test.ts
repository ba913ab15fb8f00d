import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Fake from "../../models/test/support/FakeServer.js"
import * as Wire from "../../models/test/support/wire.js"
import { ensureBuilt, museAsync, readLog, type Sandbox, sandbox } from "./support/cli.js"

// The context window of a model the table does not know: from --context-window, the config files'
// models.<id>.contextWindow, or the server's own model list; recorded with the session. Real HTTP
// against a local server speaking Chat Completions.

beforeAll(() => ensureBuilt(), 240_000)

/** A Chat Completions server: `turns` read_file calls, then "Done."; `/v1/models` as given. */
const serve = (options: { readonly turns?: number; readonly models?: unknown } = {}) =>
  Fake.listen({
    fallback: (req, res, recorded) => {
      if (req.method === "GET" && recorded.url === "/v1/models") {
        if (options.models === undefined) {
          res.writeHead(404, { "content-type": "application/json" })
          res.end(JSON.stringify({ error: { message: "not found" } }))
        } else {
          res.writeHead(200, { "content-type": "application/json" })
          res.end(JSON.stringify(options.models))
        }
        return
      }
      if (req.method !== "POST" || !recorded.url.endsWith("/chat/completions")) {
        res.writeHead(404, { "content-type": "application/json" })
        res.end(JSON.stringify({ error: { message: `no route ${req.method} ${recorded.url}` } }))
        return
      }
      const done = Wire.chat.toolResults(recorded.body)
      const events =
        done < (options.turns ?? 0)
          ? Wire.chat.toolCall({ id: `call_${done + 1}`, name: "read_file", args: { path: "README.md" } })
          : Wire.chat.text("Done.")
      void Fake.sse(events, { gapMs: 0 })(req, res, recorded)
    }
  })

const servers: Array<Fake.Listening> = []
afterAll(() => Promise.all(servers.map((s) => s.close())))

const withServer = async (options: Parameters<typeof serve>[0] = {}) => {
  const server = await serve(options)
  servers.push(server)
  return server
}

const project = (sb: Sandbox): string => {
  const dir = path.join(sb.root, "project")
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, "README.md"), "# Project\n\nA small file.\n")
  return dir
}

const run = async (sb: Sandbox, args: ReadonlyArray<string>, cwd: string, timeoutMs = 60_000) => {
  const r = museAsync(
    ["run", "read the readme", "--model", "openai-compatible/mystery-model", "--output-format", "json", ...args],
    { sb, cwd }
  )
  const timer = setTimeout(() => r.child.kill("SIGKILL"), timeoutMs)
  const exit = await r.exited
  clearTimeout(timer)
  const out = r.stdout().trim()
  return { exit, stderr: r.stderr(), result: out.startsWith("{") ? JSON.parse(out) : undefined }
}

const startedConfig = (sb: Sandbox, session: string) =>
  readLog(sb, session).find((e) => e.type === "session.started")!.data.config

describe("context window of a model muse does not know", () => {
  it("comes from --context-window, is recorded with the session, and is refused when not a whole number", async () => {
    const server = await withServer()
    const sb = sandbox({ OPENAI_COMPATIBLE_BASE_URL: `${server.url}/v1` })
    const cwd = project(sb)
    const r = await run(sb, ["--context-window", "500000"], cwd)
    expect(r.exit.code, r.stderr).toBe(0)
    expect(startedConfig(sb, r.result.session).contextWindow).toBe(500_000)
    // the flag wins: the server's list was not asked
    expect(server.requests.filter((q) => q.url === "/v1/models")).toHaveLength(0)

    const bad = await run(sb, ["--context-window", "0"], cwd)
    expect(bad.exit.code).toBe(2)
    expect(bad.stderr).toContain("--context-window must be a whole number of tokens")
  }, 300_000)

  it("comes from models.<id>.contextWindow in the config files (the project's beats the user's)", async () => {
    const server = await withServer()
    const sb = sandbox({ OPENAI_COMPATIBLE_BASE_URL: `${server.url}/v1` })
    const cwd = project(sb)
    fs.mkdirSync(path.join(sb.home, ".config", "muse"), { recursive: true })
    fs.writeFileSync(
      path.join(sb.home, ".config", "muse", "config.json"),
      JSON.stringify({ models: { "openai-compatible/mystery-model": { contextWindow: 250_000 } } })
    )
    const user = await run(sb, [], cwd)
    expect(user.exit.code, user.stderr).toBe(0)
    expect(startedConfig(sb, user.result.session).contextWindow).toBe(250_000)

    fs.mkdirSync(path.join(cwd, ".muse"), { recursive: true })
    fs.writeFileSync(
      path.join(cwd, ".muse", "config.json"),
      JSON.stringify({ models: { "mystery-model": { contextWindow: 400_000 } } })
    )
    // a project's own config takes effect only in a trusted folder
    const untrusted = await run(sb, [], cwd)
    expect(startedConfig(sb, untrusted.result.session).contextWindow).toBe(250_000)
    const proj = await run(sb, ["--trust"], cwd)
    expect(proj.exit.code, proj.stderr).toBe(0)
    expect(startedConfig(sb, proj.result.session).contextWindow).toBe(400_000)

    fs.writeFileSync(
      path.join(cwd, ".muse", "config.json"),
      JSON.stringify({ models: { "mystery-model": { contextWindow: "large" } } })
    )
    const bad = await run(sb, ["--trust"], cwd)
    expect(bad.exit.code).toBe(2)
    expect(bad.stderr).toContain('field "models')
  }, 300_000)

  it("comes from the server's model list (vLLM's max_model_len), else the default", async () => {
    const vllm = await withServer({
      models: { object: "list", data: [{ id: "mystery-model", object: "model", max_model_len: 131_072 }] }
    })
    const sb = sandbox({ OPENAI_COMPATIBLE_BASE_URL: `${vllm.url}/v1` })
    const cwd = project(sb)
    const r = await run(sb, [], cwd)
    expect(r.exit.code, r.stderr).toBe(0)
    expect(startedConfig(sb, r.result.session).contextWindow).toBe(131_072)
    expect(vllm.requests.filter((q) => q.url === "/v1/models")).toHaveLength(1)

    const silent = await withServer()
    const sb2 = sandbox({ OPENAI_COMPATIBLE_BASE_URL: `${silent.url}/v1` })
    const r2 = await run(sb2, [], project(sb2))
    expect(r2.exit.code, r2.stderr).toBe(0)
    expect(startedConfig(sb2, r2.result.session).contextWindow).toBe(32_768)
  }, 300_000)

  it("500 tool calls with a 1M window: no compaction, no turn budget, the session completes", async () => {
    const server = await withServer({ turns: 500 })
    const sb = sandbox({ OPENAI_COMPATIBLE_BASE_URL: `${server.url}/v1` })
    const cwd = project(sb)
    const r = await run(sb, ["--context-window", "1000000", "--no-crew"], cwd, 600_000)
    expect(r.exit.code, r.stderr).toBe(0)
    expect(r.result).toMatchObject({ status: "completed", text: "Done.", modelCalls: 501 })
    const events = readLog(sb, r.result.session)
    expect(events.filter((e) => e.type === "tool.completed")).toHaveLength(500)
    expect(events.filter((e) => e.type === "context.compacted")).toHaveLength(0)
    // every request carried the whole history: nothing was masked or summarized away
    const last = server.requests[server.requests.length - 1]!
    expect(Wire.chat.toolResults(last.body)).toBe(500)
  }, 700_000)
})
