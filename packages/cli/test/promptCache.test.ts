import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Fake from "../../models/test/support/FakeServer.js"
import * as Wire from "../../models/test/support/wire.js"
import { ensureBuilt, museAsync, type Sandbox, sandbox } from "./support/cli.js"

// What `muse run` puts on the wire so that a provider's prompt cache holds the session's prefix:
// OpenAI's Responses API gets a `prompt_cache_key` stable for the session; Anthropic gets cache
// breakpoints on the system prompt and the newest message. Real HTTP against a local server.

beforeAll(() => ensureBuilt(), 240_000)

const ROUTES: Record<Wire.Format, string> = {
  chat: "/chat/completions",
  anthropic: "/messages",
  responses: "/responses"
}

/** A server speaking `format`: two read_file calls, then "Done.". */
const serve = (format: Wire.Format) =>
  Fake.listen({
    fallback: (req, res, recorded) => {
      if (req.method !== "POST" || !recorded.url.endsWith(ROUTES[format])) {
        res.writeHead(404, { "content-type": "application/json" })
        res.end(JSON.stringify({ error: { message: `no route ${req.method} ${recorded.url}` } }))
        return
      }
      const wire = Wire.of(format)
      const done = wire.toolResults(recorded.body)
      const events =
        done < 2
          ? wire.toolCall({ id: `call_${done + 1}`, name: "read_file", args: { path: "README.md" } })
          : wire.text("Done.")
      void Fake.sse(events, { gapMs: 0 })(req, res, recorded)
    }
  })

const servers: Array<Fake.Listening> = []
afterAll(() => Promise.all(servers.map((s) => s.close())))

const runAgainst = async (format: Wire.Format, spec: string, env: (url: string) => Record<string, string>) => {
  const server = await serve(format)
  servers.push(server)
  const sb: Sandbox = sandbox(env(server.url))
  const cwd = path.join(sb.root, "project")
  fs.mkdirSync(cwd, { recursive: true })
  fs.writeFileSync(path.join(cwd, "README.md"), "# Project\n")
  const r = museAsync(["run", "read the readme twice", "--model", spec, "--output-format", "json"], { sb, cwd })
  const timer = setTimeout(() => r.child.kill("SIGKILL"), 60_000)
  const exit = await r.exited
  clearTimeout(timer)
  expect(exit.code, r.stderr()).toBe(0)
  const result = JSON.parse(r.stdout().trim())
  const bodies = server.requests.filter((q) => q.url.endsWith(ROUTES[format])).map((q) => q.body as any)
  expect(bodies).toHaveLength(3)
  return { session: result.session as string, bodies }
}

describe("prompt caching on the wire", () => {
  it("OpenAI Responses: every request of a session carries prompt_cache_key muse-<session>", async () => {
    const { session, bodies } = await runAgainst("responses", "openai/gpt-4.1", (url) => ({
      OPENAI_BASE_URL: `${url}/v1`,
      OPENAI_API_KEY: "test-key"
    }))
    expect(session).toMatch(/\S/)
    for (const body of bodies) expect(body.prompt_cache_key).toBe(`muse-${session}`)
  }, 120_000)

  it("Anthropic: breakpoints on the system prompt and the newest message only", async () => {
    const { bodies } = await runAgainst("anthropic", "anthropic/claude-sonnet-4-5", (url) => ({
      ANTHROPIC_BASE_URL: url,
      ANTHROPIC_API_KEY: "test-key"
    }))
    const ephemeral = (blocks: unknown) =>
      Array.isArray(blocks) && blocks.some((b: any) => b?.cache_control?.type === "ephemeral")
    for (const body of bodies) {
      expect(ephemeral(body.system)).toBe(true)
      expect(ephemeral(body.messages.at(-1).content)).toBe(true)
      expect(body.messages.slice(0, -1).some((m: any) => ephemeral(m.content))).toBe(false)
      expect(body.prompt_cache_key).toBeUndefined()
    }
  }, 120_000)

  it("an OpenAI-compatible server gets no field it may not know", async () => {
    const { bodies } = await runAgainst("chat", "openai-compatible/some-model", (url) => ({
      OPENAI_COMPATIBLE_BASE_URL: `${url}/v1`
    }))
    for (const body of bodies) expect(body.prompt_cache_key).toBeUndefined()
  }, 120_000)
})
