import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Tools } from "@musekit/core"
import { Effect } from "effect"
import { CodingTools, WorkspaceNode } from "../src/index.js"
import { findRipgrep } from "../src/internal/ripgrep.js"

/** ripgrep comes with the package (or is on PATH); where neither is, the comparisons cannot run. */
const noRg =
  (await findRipgrep()) === undefined ? "no ripgrep for this platform: ripgrep-vs-JS comparison skipped" : undefined

/** A small repository: nested .gitignore files, a negation, hidden files, .git, a binary file. */
const fixture = () => {
  const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "muse-search-")))
  const files: Record<string, string | Buffer> = {
    ".gitignore": "*.log\n!keep.log\nbuild/\nnode_modules/\n",
    ".git/config": "needle in git\n",
    ".hidden/x.ts": "needle hidden\n",
    "a/b.txt": "needle a/b\n",
    "a-c.txt": "needle a-c\n",
    "a.txt": "needle a\nno match here\nneedle again\n",
    "bin.dat": Buffer.from("needle\0binary\n"),
    "build/out.js": "needle built\n",
    "crlf.txt": "needle crlf\r\nsecond\r\n",
    "keep.log": "needle kept\n",
    "debug.log": "needle debug\n",
    "long.txt": `needle ${"z".repeat(500)}\n`,
    "node_modules/pkg/index.js": "needle module\n",
    "src/a.ts": "const needle = 1\nexport {}\n",
    "src/b.js": "needle()\nNEEDLE\nnot this one\n",
    "src/nested/.gitignore": "generated.ts\n",
    "src/nested/generated.ts": "needle generated\n",
    "src/nested/c.ts": "// needle in nested\n"
  }
  for (const [rel, content] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true })
    fs.writeFileSync(path.join(root, rel), content)
  }
  return root
}

const harness = (root: string, options?: CodingTools.Options) =>
  Effect.gen(function* () {
    const workspace = yield* WorkspaceNode.make(root)
    const defs = CodingTools.make(options)
    const ctx: Tools.CallContext = { agent: "main", callId: "c", workspace, progress: () => Effect.void }
    const call = (name: string, params: unknown): Effect.Effect<any, Tools.ToolError> => {
      const def = defs.find((d) => d.name === name)!
      return Effect.flatMap(Tools.decodeParams(def, params), (p) => def.handler(p, ctx))
    }
    return { call }
  })

describe("CodingTools: list_files", () => {
  it.effect("lists files sorted, skipping .git and what .gitignore ignores (nested files, negations)", () =>
    Effect.gen(function* () {
      const t = yield* harness(fixture())
      const all = yield* t.call("list_files", {})
      expect(all).toEqual({
        files: [
          ".gitignore",
          ".hidden/x.ts",
          "a/b.txt",
          "a-c.txt",
          "a.txt",
          "bin.dat",
          "crlf.txt",
          "keep.log",
          "long.txt",
          "src/a.ts",
          "src/b.js",
          "src/nested/.gitignore",
          "src/nested/c.ts"
        ],
        truncated: false
      })
      expect((yield* t.call("list_files", { path: "src" })).files).toEqual([
        "src/a.ts",
        "src/b.js",
        "src/nested/.gitignore",
        "src/nested/c.ts"
      ])
    })
  )

  it.effect("filters by glob: names at any depth, or paths relative to the listed directory", () =>
    Effect.gen(function* () {
      const t = yield* harness(fixture())
      expect((yield* t.call("list_files", { pattern: "*.ts" })).files).toEqual([
        ".hidden/x.ts",
        "src/a.ts",
        "src/nested/c.ts"
      ])
      expect((yield* t.call("list_files", { pattern: "src/**/*.ts" })).files).toEqual(["src/a.ts", "src/nested/c.ts"])
      expect((yield* t.call("list_files", { path: "src", pattern: "nested/*" })).files).toEqual([
        "src/nested/.gitignore",
        "src/nested/c.ts"
      ])
      expect((yield* t.call("list_files", { pattern: "*.{log,js}" })).files).toEqual(["keep.log", "src/b.js"])
      const none = yield* t.call("list_files", { pattern: "*.rs" })
      expect(none).toEqual({ files: [], truncated: false, note: "no files match *.rs" })
    })
  )

  it.effect("caps the list with a note; an ignored directory named explicitly is listed anyway", () =>
    Effect.gen(function* () {
      const t = yield* harness(fixture())
      const capped = yield* t.call("list_files", { limit: 3 })
      expect(capped).toEqual({
        files: [".gitignore", ".hidden/x.ts", "a/b.txt"],
        truncated: true,
        note: "showing the first 3 files in path order; more exist: narrow the listing with path or pattern"
      })
      const small = yield* harness(fixture(), { listLimit: 2 })
      expect((yield* small.call("list_files", {})).files).toHaveLength(2)
      const build = yield* t.call("list_files", { path: "build" })
      expect(build.files).toEqual(["build/out.js"])
      expect(build.note).toBe("build is ignored by .gitignore; listed anyway")
      expect((yield* t.call("list_files", { path: "src/a.ts" })).files).toEqual(["src/a.ts"])
      expect(yield* Effect.flip(t.call("list_files", { path: "nope" }))).toMatchObject({
        message: "nope does not exist"
      })
    })
  )
})

describe("CodingTools: grep", () => {
  const queries: Array<Record<string, unknown>> = [
    { pattern: "needle" },
    { pattern: "NEEDLE", ignore_case: true, glob: "*.js" },
    { pattern: "needle", path: "src/nested" },
    { pattern: "needle", path: "src/nested/generated.ts" },
    { pattern: "needle", path: "build" },
    { pattern: "needle", glob: "src/**/*.ts" },
    { pattern: "needle", path: "src", glob: "nested/*.ts" },
    { pattern: "^needle \\w+$" },
    { pattern: "crlf$" },
    { pattern: "needle", limit: 3 },
    { pattern: "absent-text" }
  ]

  const expected: Record<number, unknown> = {
    0: [
      ".hidden/x.ts:1: needle hidden",
      "a/b.txt:1: needle a/b",
      "a-c.txt:1: needle a-c",
      "a.txt:1: needle a",
      "a.txt:3: needle again",
      "crlf.txt:1: needle crlf",
      "keep.log:1: needle kept",
      `long.txt:1: needle ${"z".repeat(293)}…`,
      "src/a.ts:1: const needle = 1",
      "src/b.js:1: needle()",
      "src/nested/c.ts:1: // needle in nested"
    ],
    1: ["src/b.js:1: needle()", "src/b.js:2: NEEDLE"],
    2: ["src/nested/c.ts:1: // needle in nested"],
    3: ["src/nested/generated.ts:1: needle generated"],
    4: ["build/out.js:1: needle built"],
    5: ["src/a.ts:1: const needle = 1", "src/nested/c.ts:1: // needle in nested"],
    6: ["src/nested/c.ts:1: // needle in nested"],
    7: [
      ".hidden/x.ts:1: needle hidden",
      "a.txt:1: needle a",
      "a.txt:3: needle again",
      "keep.log:1: needle kept",
      `long.txt:1: needle ${"z".repeat(293)}…`
    ],
    8: [],
    9: [".hidden/x.ts:1: needle hidden", "a/b.txt:1: needle a/b", "a-c.txt:1: needle a-c"],
    10: []
  }

  it.effect("ripgrep and the JS fallback give the same, expected results", (ctx) => {
    if (noRg) ctx.skip(noRg)
    return Effect.gen(function* () {
      const root = fixture()
      // NUL far into the file: ripgrep has already reported matches when it notices
      fs.writeFileSync(path.join(root, "late-binary.txt"), `needle early\n${"filler line\n".repeat(50_000)}\0\n`)
      const rg = yield* harness(root, { grepEngine: "ripgrep", grepCountMs: 60_000 })
      const js = yield* harness(root, { grepEngine: "js", grepCountMs: 60_000 })
      for (const [i, q] of queries.entries()) {
        const a = yield* rg.call("grep", q)
        const b = yield* js.call("grep", q)
        expect(a, `ripgrep vs js for ${JSON.stringify(q)}`).toEqual(b)
        expect(a.matches, JSON.stringify(q)).toEqual(expected[i])
      }
      const capped = yield* rg.call("grep", { pattern: "needle", limit: 3 })
      expect(capped.truncated).toBe(true)
      expect(capped).toMatchObject({ total: 11, files: 10 })
      expect(capped.note).toBe(
        "11 matching lines in 10 files; showing the first 3; narrow it with path, glob or a more specific pattern"
      )
      expect((yield* rg.call("grep", { pattern: "absent-text" })).note).toBe("no matches")
      expect((yield* js.call("grep", { pattern: "needle", path: "build" })).note).toBe(
        "build is ignored by .gitignore; searched anyway"
      )
    })
  })

  it.effect("the engine is really chosen by the option; bad regexes and paths are clear errors", () =>
    Effect.gen(function* () {
      const root = fixture()
      const missing = yield* harness(root, { grepEngine: "ripgrep", ripgrepPath: path.join(root, "no-rg") })
      expect((yield* Effect.flip(missing.call("grep", { pattern: "needle" }))).message).toMatch(
        /^could not run ripgrep/
      )
      // the JS engine never touches ripgrep
      const js = yield* harness(root, { grepEngine: "js", ripgrepPath: path.join(root, "no-rg") })
      expect((yield* js.call("grep", { pattern: "needle", path: "src/nested" })).matches).toHaveLength(1)
      for (const engine of noRg ? (["js"] as const) : (["ripgrep", "js"] as const)) {
        const t = yield* harness(root, { grepEngine: engine })
        expect((yield* Effect.flip(t.call("grep", { pattern: "(unclosed" }))).message, engine).toMatch(/^invalid regex/)
        expect((yield* Effect.flip(t.call("grep", { pattern: "x", path: "nope" }))).message).toBe("nope does not exist")
      }
      const auto = yield* harness(root)
      expect((yield* auto.call("grep", { pattern: "needle" })).matches).toEqual(expected[0])
    })
  )
})
