import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Tools } from "@musekit/core"
import { Effect } from "effect"
import { CodingTools, WorkspaceNode } from "../src/index.js"
import { findRipgrep } from "../src/internal/ripgrep.js"

const tree = (files: Record<string, string | Buffer>) => {
  const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "muse-scale-")))
  for (const [rel, content] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true })
    fs.writeFileSync(path.join(root, rel), content)
  }
  return root
}

const git = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", args, {
    cwd,
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      ...process.env,
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_AUTHOR_NAME: "t",
      GIT_AUTHOR_EMAIL: "t@example.invalid",
      GIT_COMMITTER_NAME: "t",
      GIT_COMMITTER_EMAIL: "t@example.invalid"
    }
  }).toString()

const harness = (root: string, options?: CodingTools.Options) =>
  Effect.gen(function* () {
    const workspace = yield* WorkspaceNode.make(root)
    const defs = CodingTools.make(options)
    const ctx: Tools.CallContext = { agent: "main", callId: "c", workspace, progress: () => Effect.void }
    const def = (name: string) => defs.find((d) => d.name === name)!
    const call = (name: string, params: unknown): Effect.Effect<any, Tools.ToolError> =>
      Effect.flatMap(Tools.decodeParams(def(name), params), (p) => def(name).handler(p, ctx))
    return { call, def }
  })

const engines = ["ripgrep", "js"] as const

/** 40 files in 4 directories, 3 matching lines each. */
const manyMatches = () => {
  const files: Record<string, string> = {}
  for (let i = 0; i < 40; i++)
    files[`d${i % 4}/f${String(i).padStart(2, "0")}.txt`] = "needle 1\nother\nneedle 2\nneedle 3\n"
  return tree(files)
}

describe("grep: totals, limits and the note", () => {
  it.effect("counts every matching line, shows the first ones in path order and says how to narrow it", () =>
    Effect.gen(function* () {
      const root = manyMatches()
      const results = []
      for (const engine of engines) {
        // count to the end however slow the machine is today
        const t = yield* harness(root, { grepEngine: engine, grepCountMs: 60_000 })
        const all = yield* t.call("grep", { pattern: "needle", limit: 1000 })
        expect(all).toMatchObject({ total: 120, files: 40, truncated: false })
        expect(all.matches).toHaveLength(120)
        expect(all.matches.slice(0, 4)).toEqual([
          "d0/f00.txt:1: needle 1",
          "d0/f00.txt:3: needle 2",
          "d0/f00.txt:4: needle 3",
          "d0/f04.txt:1: needle 1"
        ])
        const capped = yield* t.call("grep", { pattern: "needle", limit: 10 })
        expect(capped).toEqual({
          matches: all.matches.slice(0, 10),
          total: 120,
          files: 40,
          truncated: true,
          note: "120 matching lines in 40 files; showing the first 10; narrow it with path, glob or a more specific pattern"
        })
        results.push(capped)
      }
      expect(results[0]).toEqual(results[1])
    })
  )

  it.effect("a pattern found all over stops counting early: lower-bound totals, still the first matches", () =>
    Effect.gen(function* () {
      const root = manyMatches()
      for (const engine of engines) {
        const full = yield* (yield* harness(root, { grepEngine: engine })).call("grep", { pattern: "needle", limit: 5 })
        const t = yield* harness(root, { grepEngine: engine, grepCountMs: 0 })
        const r = yield* t.call("grep", { pattern: "needle", limit: 5 })
        expect(r.matches, engine).toEqual(full.matches)
        expect(r.truncated).toBe(true)
        if (r.counted_all === false) {
          expect(r.total).toBeGreaterThanOrEqual(5)
          expect(r.total).toBeLessThanOrEqual(120)
          expect(r.note).toMatch(/^at least [\d,]+ matching lines in at least [\d,]+ files \(counting stopped early\)/)
        } else expect(r.total).toBe(120)
      }
      // the JS engine reads in path order: after the first file it has more than 5 and stops
      const js = yield* (yield* harness(root, { grepEngine: "js", grepCountMs: 0 })).call("grep", {
        pattern: "needle",
        limit: 2
      })
      expect(js).toMatchObject({ counted_all: false, total: 3, files: 1 })
    })
  )
})

describe("ignore files: never listed, never searched", () => {
  const files = {
    ".gitignore": "*.log\n!keep.log\nbuild/\n",
    "keep.log": "needle kept\n",
    "debug.log": "needle debug\n",
    "build/out.ts": "needle built\n",
    "src/a.ts": "needle a\n",
    "src/.gitignore": "gen.ts\n",
    "src/gen.ts": "needle generated\n",
    "src/deep/b.ts": "needle b\n",
    "src/deep/.ignore": "secret.ts\n",
    "src/deep/secret.ts": "needle secret\n",
    "src/deep/.rgignore": "rgonly.ts\n",
    "src/deep/rgonly.ts": "needle rgonly\n",
    "docs/readme.md": "needle docs\n",
    "excluded.txt": "needle excluded\n"
  }
  const ignored = ["debug.log", "build/out.ts", "src/gen.ts", "src/deep/secret.ts", "src/deep/rgonly.ts"]

  for (const kind of ["plain folder", "git repository"] as const) {
    it.effect(`${kind}: listings, searches and globs leave ignored files out`, () =>
      Effect.gen(function* () {
        const root = tree(files)
        if (kind === "git repository") {
          git(root, "init", "-q")
          fs.writeFileSync(path.join(root, ".git", "info", "exclude"), "excluded.txt\n")
          git(root, "add", "-A")
          git(root, "commit", "-q", "-m", "x")
        }
        const hidden = kind === "git repository" ? [...ignored, "excluded.txt"] : ignored
        const t = yield* harness(root)
        const listed = (yield* t.call("list_files", {})).files as Array<string>
        for (const f of hidden) expect(listed, f).not.toContain(f)
        expect(listed).toEqual(
          expect.arrayContaining(["keep.log", "src/a.ts", "src/deep/b.ts", "docs/readme.md", ".gitignore"])
        )
        // globs that name ignored files do not bring them back (ripgrep's --glob would)
        for (const pattern of ["*.log", "*.ts", "src/**/*.ts", "build/*", "src/deep/*"]) {
          const some = (yield* t.call("list_files", { pattern })).files as Array<string>
          for (const f of hidden) expect(some, `${pattern}: ${f}`).not.toContain(f)
        }
        expect((yield* t.call("list_files", { pattern: "*.log" })).files).toEqual(["keep.log"])
        for (const engine of engines) {
          const g = yield* harness(root, { grepEngine: engine })
          for (const glob of [undefined, "*.log", "*.ts", "src/**/*.ts", "src/deep/*", "!*.md"]) {
            const r = yield* g.call("grep", { pattern: "needle", ...(glob ? { glob } : {}) })
            const found = (r.matches as Array<string>).map((m) => m.slice(0, m.indexOf(":")))
            for (const f of hidden) expect(found, `${engine} ${glob}: ${f}`).not.toContain(f)
          }
          const ts = yield* g.call("grep", { pattern: "needle", glob: "*.ts" })
          expect(ts.matches, engine).toEqual(["src/a.ts:1: needle a", "src/deep/b.ts:1: needle b"])
          const deep = yield* g.call("grep", { pattern: "needle", path: "src", glob: "deep/*.ts" })
          expect(deep.matches, engine).toEqual(["src/deep/b.ts:1: needle b"])
          const notMd = yield* g.call("grep", { pattern: "needle", path: "docs", glob: "!*.md" })
          expect(notMd.matches, engine).toEqual([])
        }
      })
    )
  }
})

describe("grep hands globs and paths to ripgrep", () => {
  it.effect("a file-name glob goes in as a file type, a path glob narrows the directory searched", () =>
    Effect.gen(function* () {
      const root = tree({
        "src/a.ts": "needle a\n",
        "src/b.js": "needle b\n",
        "src/nested/c.ts": "needle c\n",
        "lib/d.ts": "needle d\n"
      })
      const real = yield* Effect.promise(() => findRipgrep())
      const log = path.join(root, "..", `${path.basename(root)}-argv.log`)
      const wrapper = path.join(root, "..", `${path.basename(root)}-rg.sh`)
      fs.writeFileSync(
        wrapper,
        `#!/bin/sh\nprintf '%s\\n' "$@" >> '${log}'\nprintf '==\\n' >> '${log}'\nexec '${real}' "$@"\n`
      )
      fs.chmodSync(wrapper, 0o755)
      const t = yield* harness(root, { grepEngine: "ripgrep", ripgrepPath: wrapper })
      const byName = yield* t.call("grep", { pattern: "needle", glob: "*.ts" })
      expect(byName.matches).toEqual(["lib/d.ts:1: needle d", "src/a.ts:1: needle a", "src/nested/c.ts:1: needle c"])
      const first = fs.readFileSync(log, "utf8").split("==\n")[0]!.split("\n")
      expect(first).toEqual(expect.arrayContaining(["--type-add", "musekit:*.ts", "--type", "musekit", "--count"]))
      // no sorting: ripgrep keeps all its threads for the count
      expect(first).not.toContain("--sort")
      fs.writeFileSync(log, "")
      const byPath = yield* t.call("grep", { pattern: "needle", glob: "src/nested/*.ts" })
      expect(byPath.matches).toEqual(["src/nested/c.ts:1: needle c"])
      const argv = fs.readFileSync(log, "utf8").split("==\n")[0]!.split("\n")
      expect(argv.slice(argv.indexOf("--") + 1, argv.indexOf("--") + 2)).toEqual(["src/nested"])
      expect(argv).toEqual(expect.arrayContaining(["musekit:*.ts"]))
    })
  )
})

describe("edit_file on a large file", () => {
  it.effect("replace_all on 4,000 of 40,000 lines: exact counts, a cut diff that says so", () =>
    Effect.gen(function* () {
      const lines = Array.from({ length: 40_000 }, (_, i) =>
        i % 10 === 3 ? `  return visitNode(node${i}, context)` : `  const v${i} = node.kind + ${i}`
      )
      const before = `${lines.join("\n")}\n`
      const root = tree({ "big.js": before })
      const t = yield* harness(root)
      const r = yield* t.call("edit_file", {
        path: "big.js",
        edits: [{ old_text: "visitNode(", new_text: "visitEachNode(", replace_all: true }]
      })
      expect(r).toMatchObject({ added: 4000, removed: 4000 })
      expect(r.note).toBe(
        "the diff (+4,000 -4,000 lines) is longer than 64 KiB and was cut; the file itself was written in full"
      )
      expect(Buffer.byteLength(r.diff)).toBeLessThanOrEqual(64 * 1024)
      // the whole diff applies and its counts are those of GNU diff
      fs.writeFileSync(path.join(root, "big.js"), before)
      const whole = yield* (yield* harness(root, { maxDiffBytes: 1 << 30 })).call("edit_file", {
        path: "big.js",
        edits: [{ old_text: "visitNode(", new_text: "visitEachNode(", replace_all: true }]
      })
      expect(whole.note).toBeUndefined()
      const after = fs.readFileSync(path.join(root, "big.js"), "utf8")
      fs.writeFileSync(path.join(root, "orig.js"), before)
      const patched = path.join(root, "patched.js")
      fs.writeFileSync(patched, before)
      fs.writeFileSync(
        path.join(root, "d.patch"),
        whole.diff.replace(/^--- a\/big.js\n\+\+\+ b\/big.js/, `--- x\n+++ x`)
      )
      execFileSync("patch", ["-s", patched, path.join(root, "d.patch")])
      expect(fs.readFileSync(patched, "utf8")).toBe(after)
      const gnu = (() => {
        try {
          return execFileSync("diff", ["-u", path.join(root, "orig.js"), path.join(root, "big.js")], {
            maxBuffer: 1 << 30
          }).toString()
        } catch (e: any) {
          return String(e.stdout)
        }
      })()
      const count = (d: string, c: string) =>
        d.split("\n").filter((l) => l.startsWith(c) && !l.startsWith(`${c}${c}${c}`)).length
      expect([count(gnu, "+"), count(gnu, "-")]).toEqual([whole.added, whole.removed])
    })
  )

  it.effect("write_file with moved and rewritten blocks: counts equal diff --minimal", () =>
    Effect.gen(function* () {
      let seed = 7
      const rnd = () => {
        seed = (seed * 1103515245 + 12345) % 2147483648
        return seed / 2147483648
      }
      const a = Array.from({ length: 3000 }, (_, i) => `line ${i % 700} ${Math.floor(rnd() * 50)}`)
      const b = a.flatMap((l, i) => (rnd() < 0.05 ? [] : rnd() < 0.05 ? [l, `new ${i}`] : [l]))
      const root = tree({ "f.txt": `${a.join("\n")}\n` })
      const t = yield* harness(root, { maxDiffBytes: 1 << 30 })
      const r = yield* t.call("write_file", { path: "f.txt", content: `${b.join("\n")}\n` })
      fs.writeFileSync(path.join(root, "a.txt"), `${a.join("\n")}\n`)
      const gnu = (() => {
        try {
          return execFileSync("diff", ["--minimal", "-u", path.join(root, "a.txt"), path.join(root, "f.txt")], {
            maxBuffer: 1 << 30
          }).toString()
        } catch (e: any) {
          return String(e.stdout)
        }
      })()
      const count = (c: string) =>
        gnu.split("\n").filter((l) => l.startsWith(c) && !l.startsWith(`${c}${c}${c}`)).length
      expect([r.added, r.removed]).toEqual([count("+"), count("-")])
    })
  )
})

describe("results sized to the model's context", () => {
  const budget = Tools.resultBudget(32_768)

  it.effect("list_files, grep, read_file, edit_file and run_shell fit a 32k model's budget with a note", () =>
    Effect.gen(function* () {
      const files: Record<string, string> = {}
      for (let i = 0; i < 3000; i++) files[`pkg/m${i % 30}/file-${i}.ts`] = `export const needle${i} = ${i}\n`
      files["big.txt"] = Array.from({ length: 20_000 }, (_, i) => `line ${i} of a long file`).join("\n")
      const root = tree(files)
      const t = yield* harness(root, { grepCountMs: 60_000 })
      const fitted = (name: string, r: unknown) => {
        const f = Tools.fitResult(t.def(name), r, budget) as any
        expect(Tools.jsonBytes(f), name).toBeLessThanOrEqual(budget.bytes)
        return f
      }
      const list = yield* t.call("list_files", { limit: 10_000 })
      expect(list.files).toHaveLength(3001)
      const l = fitted("list_files", list)
      expect(l.files).toEqual(list.files.slice(0, l.files.length))
      expect(l.note).toMatch(/^showing the first [\d,]+ of 3,001 files, as many as fit the context; narrow the listing/)
      const named = fitted("list_files", { ...list, note: "pkg is ignored by .gitignore; listed anyway" })
      expect(named.note).toMatch(
        /^pkg is ignored by \.gitignore; listed anyway; showing the first [\d,]+ of 3,001 files/
      )
      const grep = yield* t.call("grep", { pattern: "needle", limit: 5000 })
      const g = fitted("grep", grep)
      expect(g).toMatchObject({ total: 3000, files: 3000, truncated: true })
      expect(g.note).toMatch(
        /^3,000 matching lines in 3,000 files; showing the first [\d,]+, as many as fit the context/
      )
      const read = yield* t.call("read_file", { path: "big.txt" })
      const rd = fitted("read_file", read)
      expect(rd.content.split("\n")).toHaveLength(rd.end_line)
      expect(rd.note).toBe(
        `output cut to fit the context: showing lines 1-${rd.end_line} of 20,000; read on with offset=${rd.end_line + 1} and a limit`
      )
      const edit = yield* t.call("edit_file", {
        path: "big.txt",
        edits: [{ old_text: "of a long", new_text: "of a longer", replace_all: true }]
      })
      const e = fitted("edit_file", edit)
      expect(e).toMatchObject({ added: 20_000, removed: 20_000 })
      expect(e.note).toMatch(/^the diff \(\+20,000 -20,000 lines\) is cut to fit the context/)
      const shell = yield* t.call("run_shell", { command: "seq 1 100000" })
      const s = fitted("run_shell", shell)
      expect(s.output.endsWith("99999\n100000\n")).toBe(true)
      expect(s.note).toMatch(/output cut to fit the context: showing its last/)
      // a tool without its own fit is cut generically
      const plain = Tools.fitResult(undefined, { rows: Array.from({ length: 5000 }, (_, i) => `row ${i}`) }, budget)
      expect(Tools.jsonBytes(plain)).toBeLessThanOrEqual(budget.bytes)
      expect((plain as any).note).toMatch(/only its start is shown/)
      // small results pass through untouched
      const small = { files: ["a.ts"], truncated: false }
      expect(Tools.fitResult(t.def("list_files"), small, budget)).toBe(small)
    })
  )
})
