/**
 * MuseKit as an outside user meets it: every package packed with `pnpm pack`, the tarballs
 * installed with npm into a project outside the workspace (effect and the @effect packages at the
 * lowest versions the peer ranges allow), a custom agent, a skill plugin and a Promise-facade app
 * compiled with `tsc --strict --declaration`, then run against a local OpenAI-compatible server:
 * a session, replay --verify, resume, and replay --verify again. A Gemini model answers through
 * `@musekit/models/google` alone, with no provider package installed.
 *
 * Needs the packages built (`pnpm build`) and the npm registry. Run alone with
 * `pnpm vitest run test/consumer`.
 */
import { execFile, execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Fake from "../../packages/models/test/support/FakeServer.js"
import * as Wire from "../../packages/models/test/support/wire.js"

const repo = fileURLToPath(new URL("../..", import.meta.url))
const packages = [
  "packages/core",
  "packages/node",
  "packages/models",
  "packages/pg",
  "plugins/compaction",
  "plugins/skills",
  "plugins/worktree",
  "plugins/video",
  "plugins/mcp"
]
/** What the user's app installs (the others are packed and checked only). */
const installed = ["core", "node", "models", "plugin-compaction", "plugin-skills"]
/** The lowest versions the peer ranges allow. */
const lowest = [
  "effect@3.22.0",
  "@effect/ai@0.37.0",
  "@effect/platform@0.97.0",
  "@effect/experimental@0.61.0",
  "@effect/rpc@0.76.0",
  "typescript@5.9.3",
  "@types/node@20.19.43"
]

let work: string
let app: string
const tarballs = new Map<string, string>()
let server: Fake.Listening

const sh = (cmd: string, args: Array<string>, cwd: string) => {
  try {
    return execFileSync(cmd, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], maxBuffer: 64 << 20 })
  } catch (e) {
    const { stdout, stderr } = e as { stdout?: string; stderr?: string }
    throw new Error(`${cmd} ${args.join(" ")} failed:\n${stdout ?? ""}\n${stderr ?? ""}`.slice(0, 8000))
  }
}

/** Runs a program without blocking this process, whose event loop serves the fake model. */
const runApp = (args: Array<string>, cwd: string) =>
  new Promise<string>((resolve, reject) =>
    execFile(
      process.execPath,
      args,
      { cwd, encoding: "utf8", maxBuffer: 64 << 20, timeout: 240_000 },
      (err, out, errOut) =>
        err ? reject(new Error(`${args.join(" ")} failed: ${err.message}\n${errOut}`)) : resolve(out)
    )
  )

/** A model that reads the README first, repeats what it is asked to repeat, and answers after a tool. */
const answer = (body: any) => {
  const messages: Array<any> = body?.messages ?? []
  const last = messages.at(-1)
  const text = (m: any) => (typeof m?.content === "string" ? m.content : JSON.stringify(m?.content ?? ""))
  if (last?.role === "tool") return Wire.chat.text(`The README says: ${text(last).slice(0, 40)}`)
  const asked = text(last)
  const repeat = /repeat: ([^"\\]*)/.exec(asked)
  if (repeat) return Wire.chat.text(repeat[1]!.trim())
  if (asked.includes("once more")) return Wire.chat.text("Once more: fine.")
  return Wire.chat.toolCall({ id: `call_${messages.length}`, name: "read_file", args: { path: "README.md" } })
}

beforeAll(async () => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), "muse-consumer-"))
  app = path.join(work, "app")
  fs.mkdirSync(app)
  for (const dir of packages) {
    const out = sh("pnpm", ["pack", "--pack-destination", work], path.join(repo, dir))
    const file = out.trim().split("\n").at(-1)!.trim()
    tarballs.set(
      JSON.parse(fs.readFileSync(path.join(repo, dir, "package.json"), "utf8")).name,
      path.resolve(work, file)
    )
  }
  fs.writeFileSync(path.join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }))
  const mine = installed.map((n) => tarballs.get(`@musekit/${n}`)!)
  sh("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", ...mine, ...lowest], app)
  for (const f of ["agent.ts", "plugin.ts", "promise.ts", "google.ts", "tsconfig.json"]) {
    fs.copyFileSync(fileURLToPath(new URL(`./app/${f}`, import.meta.url)), path.join(app, f))
  }
  server = await Fake.listen({
    fallback: (_req, res, recorded) => Fake.sse(answer(recorded.body))(_req, res, recorded)
  })
}, 600_000)

afterAll(async () => {
  await server?.close()
  if (work) fs.rmSync(work, { recursive: true, force: true })
})

describe("consumer", () => {
  it("every tarball holds its README, and the README's relative links resolve inside it", () => {
    for (const [name, file] of tarballs) {
      const list = sh("tar", ["-tzf", file], work).split("\n").filter(Boolean)
      expect(list, name).toContain("package/README.md")
      expect(list, name).toContain("package/dist/index.d.ts")
      expect(
        list.some((f) => /-[A-Za-z0-9_]{8}\.d\.ts$/.test(f)),
        `${name} has hashed .d.ts chunks`
      ).toBe(false)
      const readme = sh("tar", ["-xzOf", file, "package/README.md"], work)
      for (const m of readme.matchAll(/\]\(([^)#\s]+)(#[^)]*)?\)/g)) {
        const target = m[1]!
        if (/^[a-z]+:/.test(target)) continue
        expect(list, `${name} README links ${target}`).toContain(`package/${path.posix.normalize(target)}`)
      }
      const manifest = JSON.parse(sh("tar", ["-xzOf", file, "package/package.json"], work))
      expect(manifest.repository?.url, name).toBeTruthy()
      expect(
        Object.keys(manifest.dependencies ?? {}).filter((d: string) => d === "effect" || d.startsWith("@effect/")),
        name
      ).toEqual([])
      expect(JSON.stringify(manifest), name).not.toContain("workspace:")
    }
  }, 120_000)

  it("npm sees one valid tree with one effect, at the lowest version the peers allow", () => {
    sh("npm", ["ls", "--all"], app) // exits non-zero on an invalid or conflicting tree
    const effects = sh("npm", ["ls", "effect", "--all", "--parseable"], app).trim().split("\n")
    expect(effects).toHaveLength(1)
    expect(JSON.parse(fs.readFileSync(path.join(app, "node_modules/effect/package.json"), "utf8")).version).toBe(
      "3.22.0"
    )
  })

  it("a custom agent and a skill plugin compile with tsc --strict --declaration", () => {
    sh(process.execPath, [path.join(app, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.json"], app)
    expect(fs.readFileSync(path.join(app, "dist/plugin.d.ts"), "utf8")).toContain("@musekit/core")
    expect(fs.readFileSync(path.join(app, "promise.ts"), "utf8")).not.toMatch(/from "effect"/)
  }, 300_000)

  it("the Effect agent runs, replays exactly, resumes and replays again", async () => {
    const root = path.join(work, "repo-effect")
    fs.mkdirSync(root)
    fs.writeFileSync(path.join(root, "README.md"), "# Demo\nA tiny project.\n")
    const seen = server.requests.length
    const out = await runApp(["dist/agent.js", root, path.join(work, "state"), `${server.url}/v1`], app)
    const r = JSON.parse(out.trim().split("\n").at(-1)!)
    // over HttpClientNode, with the app's own user-agent
    expect(new Set(server.requests.slice(seen).map((q) => q.headers["user-agent"]))).toEqual(
      new Set(["consumer-effect/1.0"])
    )
    expect(r.turns).toHaveLength(1)
    expect(r.turns[0]).toMatch(/^The README says: /)
    // the resumed program replays the recorded turn, then answers the new input live
    expect(r.resumedTurns).toEqual([r.turns[0], "Once more: fine."])
    expect(r.replayed.matched).toBe(r.replayed.total)
    expect(r.again.matched).toBe(r.again.total)
    expect(r.again.total).toBeGreaterThan(r.replayed.total)
  }, 300_000)

  it("a Gemini model answers with no provider package installed", async () => {
    expect(fs.existsSync(path.join(app, "node_modules/@effect/ai-google"))).toBe(false)
    const reply = (text: string) => ({
      candidates: [{ content: { role: "model", parts: [{ text }] }, finishReason: "STOP", index: 0 }],
      usageMetadata: { promptTokenCount: 3, candidatesTokenCount: 2, thoughtsTokenCount: 5, totalTokenCount: 10 },
      modelVersion: "gemini-2.5-flash"
    })
    server.reply(
      Fake.json(200, reply("Hello!")),
      Fake.sse([
        { data: { ...reply("Hel"), candidates: [{ content: { role: "model", parts: [{ text: "Hel" }] }, index: 0 }] } },
        { data: reply("lo!") }
      ])
    )
    const seen = server.requests.length
    const out = await runApp(["dist/google.js", server.url], app)
    expect(JSON.parse(out.trim().split("\n").at(-1)!)).toEqual({ text: "Hello!", outputTokens: 7, streamed: "Hello!" })
    const [whole, streamed] = server.requests.slice(seen)
    expect(whole!.url).toBe("/v1beta/models/gemini-2.5-flash:generateContent")
    expect(streamed!.url).toBe("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse")
    expect(whole!.headers["x-goog-api-key"]).toBe("gemini-fake")
    expect(whole!.body.contents).toEqual([{ role: "user", parts: [{ text: "Say hello" }] }])
  }, 300_000)

  it("the Promise facade does the same with no effect import", async () => {
    const root = path.join(work, "repo-promise")
    fs.mkdirSync(root)
    fs.writeFileSync(path.join(root, "README.md"), "# Demo\nA tiny project.\n")
    const seen = server.requests.length
    const out = await runApp(["dist/promise.js", root, path.join(work, "state"), `${server.url}/v1`], app)
    const r = JSON.parse(out.trim().split("\n").at(-1)!)
    // createAgent's default client: HttpClientNode, with the version of the installed @musekit/node
    const { version } = JSON.parse(fs.readFileSync(path.join(app, "node_modules/@musekit/node/package.json"), "utf8"))
    expect(new Set(server.requests.slice(seen).map((q) => q.headers["user-agent"]))).toEqual(
      new Set([`musekit/${version}`])
    )
    expect(r.texts[0]).toMatch(/^The README says: /)
    expect(r.texts[1]).toBe("hello there")
    expect(r.texts[2]).toBe("Once more: fine.")
    expect(r.events).toBeGreaterThan(5)
    expect(r.replayed.matched).toBe(r.replayed.total)
    expect(r.again.matched).toBe(r.again.total)
    expect(r.again.total).toBeGreaterThan(r.replayed.total)
  }, 300_000)
})
