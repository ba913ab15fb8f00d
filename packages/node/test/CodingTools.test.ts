import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Tools, type Workspace } from "@musekit/core"
import { Effect } from "effect"
import { CodingTools, WorkspaceNode } from "../src/index.js"

const sha = (s: string | Buffer) => createHash("sha256").update(s).digest("hex")

const setup = () => {
  const base = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "muse-tools-")))
  const root = path.join(base, "ws")
  const outside = path.join(base, "outside")
  fs.mkdirSync(root)
  fs.mkdirSync(outside)
  fs.writeFileSync(path.join(outside, "secret.txt"), "secret\n")
  const write = (rel: string, content: string | Buffer) => {
    fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true })
    fs.writeFileSync(path.join(root, rel), content)
  }
  const read = (rel: string) => fs.readFileSync(path.join(root, rel), "utf8")
  return { base, root, outside, write, read }
}

const ctxFor = (workspace: Workspace.Service, chunks: Array<string> = []): Tools.CallContext => ({
  agent: "main",
  callId: "call-1",
  workspace,
  progress: (chunk) => Effect.sync(() => void chunks.push(chunk))
})

/** The tools of one `CodingTools.make`, called the way the agent loop calls them (decode, then handle). */
const harness = (root: string, options?: CodingTools.Options) =>
  Effect.gen(function* () {
    const ws = yield* WorkspaceNode.make(root)
    const defs = CodingTools.make(options)
    const def = (name: string) => defs.find((d) => d.name === name)!
    const call = (name: string, params: unknown): Effect.Effect<any, Tools.ToolError> =>
      Effect.flatMap(Tools.decodeParams(def(name), params), (p) => def(name).handler(p, ctxFor(ws)))
    const error = (name: string, params: unknown) => Effect.map(Effect.flip(call(name, params)), (e) => e.message)
    const preview = (name: string, params: unknown) =>
      Effect.flatMap(Tools.decodeParams(def(name), params), (p) => def(name).preview!(p, ctxFor(ws)))
    return { ws, defs, def, call, error, preview }
  })

/** Apply a unified diff to `before` with GNU patch; returns the patched text. */
const applyPatch = (before: string | null, diff: string): string => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "muse-patch-"))
  const file = path.join(dir, "f.txt")
  if (before !== null) fs.writeFileSync(file, before)
  fs.writeFileSync(path.join(dir, "d.patch"), diff)
  execFileSync("patch", ["-s", "-p0", "--no-backup-if-mismatch", "-i", "d.patch", "f.txt"], { cwd: dir })
  return fs.readFileSync(file, "utf8")
}

describe("CodingTools: definitions", () => {
  it("has the six tools with their effect classes and no reserved names", () => {
    const defs = CodingTools.make()
    expect(defs.map((d) => [d.name, d.effect, d.idempotent])).toEqual([
      ["read_file", "read", true],
      ["write_file", "write", false],
      ["edit_file", "write", false],
      ["list_files", "read", true],
      ["grep", "read", true],
      ["run_shell", "exec", false]
    ])
    for (const d of defs) {
      expect(Tools.reservedNames.has(d.name)).toBe(false)
      expect(d.description.length).toBeGreaterThan(50)
      expect((d.jsonSchema as any).type).toBe("object")
    }
    const shell = defs.find((d) => d.name === "run_shell")!
    expect(shell.summarize({ command: "npm test -- --watch=false" })).toBe("npm test -- --watch=false")
    const edit = defs.find((d) => d.name === "edit_file")!
    expect(edit.paths({ path: "src/a.ts", edits: [] })).toEqual(["src/a.ts"])
    expect((edit.jsonSchema as any).properties.edits.minItems).toBe(1)
  })

  it.effect("layer registers them in Tools", () =>
    Effect.gen(function* () {
      const tools = yield* Tools.Tools
      expect(tools.list.map((d) => d.name)).toContain("edit_file")
      expect(tools.get("grep")?.effect).toBe("read")
    }).pipe(Effect.provide(CodingTools.layer()))
  )
})

describe("CodingTools: workspace isolation", () => {
  it.effect("every tool refuses '..', absolute paths outside and symlinks leading out; nothing is written", () =>
    Effect.gen(function* () {
      const { root, outside, write } = setup()
      write("src/a.txt", "inside\n")
      fs.symlinkSync("/etc", path.join(root, "etc"))
      fs.symlinkSync(outside, path.join(root, "out"))
      fs.symlinkSync(path.join(outside, "secret.txt"), path.join(root, "secret-link"))
      fs.symlinkSync(path.join(outside, "planted.txt"), path.join(root, "dangling"))
      const t = yield* harness(root)
      const attempts: Array<[string, Record<string, unknown>]> = [
        ["read_file", { path: "../outside/secret.txt" }],
        ["read_file", { path: path.join(outside, "secret.txt") }],
        ["read_file", { path: "etc/passwd" }],
        ["read_file", { path: "secret-link" }],
        ["write_file", { path: "../outside/planted.txt", content: "x" }],
        ["write_file", { path: path.join(outside, "planted.txt"), content: "x" }],
        ["write_file", { path: "out/planted.txt", content: "x" }],
        ["write_file", { path: "out/deep/planted.txt", content: "x" }],
        ["write_file", { path: "dangling", content: "x" }],
        ["write_file", { path: "secret-link", content: "pwned\n" }],
        ["write_file", { path: "etc/muse-planted", content: "x" }],
        ["edit_file", { path: "secret-link", edits: [{ old_text: "secret", new_text: "pwned" }] }],
        ["edit_file", { path: "out/secret.txt", edits: [{ old_text: "secret", new_text: "pwned" }] }],
        ["list_files", { path: "out" }],
        ["list_files", { path: ".." }],
        ["grep", { pattern: "secret", path: "out" }],
        ["grep", { pattern: "secret", path: "secret-link" }],
        ["grep", { pattern: "root", path: "/etc" }]
      ]
      for (const [tool, params] of attempts) {
        const message = yield* t.error(tool, params)
        expect(message, `${tool} ${JSON.stringify(params)}`).toMatch(
          /^path .+ is outside the workspace .+; nothing was read or written$/
        )
      }
      expect(fs.readdirSync(outside)).toEqual(["secret.txt"])
      expect(fs.readFileSync(path.join(outside, "secret.txt"), "utf8")).toBe("secret\n")
      expect(fs.existsSync("/etc/muse-planted")).toBe(false)
      // the refusal carries the PathEscape data
      const e = yield* Effect.flip(t.call("read_file", { path: "../x" }))
      expect(e.data).toMatchObject({ _tag: "PathEscape", reason: "'..' leads out" })
    })
  )

  it.effect("listing and searching the root do not follow a symlinked directory out", () =>
    Effect.gen(function* () {
      const { root, outside, write } = setup()
      write("a.txt", "secret here too\n")
      fs.symlinkSync(outside, path.join(root, "out"))
      const t = yield* harness(root)
      expect((yield* t.call("list_files", {})).files).toEqual(["a.txt", "out"])
      for (const engine of ["js", "ripgrep"] as const) {
        const g = yield* harness(root, { grepEngine: engine })
        expect((yield* g.call("grep", { pattern: "secret" })).matches).toEqual(["a.txt:1: secret here too"])
      }
    })
  )
})

describe("CodingTools: read_file", () => {
  it.effect("returns numbered lines, line ranges and a note on how to continue", () =>
    Effect.gen(function* () {
      const { write, root } = setup()
      write("f.txt", Array.from({ length: 10 }, (_, i) => `line ${i + 1}`).join("\n"))
      write("crlf.txt", "one\r\ntwo\r\n")
      write("empty.txt", "")
      const t = yield* harness(root)
      const all = yield* t.call("read_file", { path: "f.txt" })
      expect(all).toEqual({
        path: "f.txt",
        content: Array.from({ length: 10 }, (_, i) => `${String(i + 1).padStart(6)}\tline ${i + 1}`).join("\n"),
        start_line: 1,
        end_line: 10,
        total_lines: 10
      })
      const part = yield* t.call("read_file", { path: "./f.txt", offset: 3, limit: 2 })
      expect(part.content).toBe("     3\tline 3\n     4\tline 4")
      expect(part.note).toBe("showing lines 3-4 of 10; continue with offset=5")
      const tail = yield* t.call("read_file", { path: "f.txt", offset: 9 })
      expect(tail.content).toBe("     9\tline 9\n    10\tline 10")
      expect(tail.note).toBeUndefined()
      const past = yield* t.call("read_file", { path: "f.txt", offset: 50 })
      expect(past.content).toBe("")
      expect(past.note).toBe("offset 50 is past the end: the file has 10 lines")
      expect((yield* t.call("read_file", { path: "crlf.txt" })).content).toBe("     1\tone\n     2\ttwo")
      expect((yield* t.call("read_file", { path: "empty.txt" })).note).toBe("the file is empty")
      expect(yield* t.error("read_file", { path: "f.txt", offset: 0 })).toContain("invalid arguments for read_file")
      expect(yield* t.error("read_file", { path: "nope.txt" })).toBe("nope.txt does not exist")
      expect(yield* t.error("read_file", { path: "." })).toBe(". is a directory; use list_files to see its contents")
    })
  )

  it.effect("caps the output by size (256 KiB by default) and says how to read more", () =>
    Effect.gen(function* () {
      const { write, root } = setup()
      const line = "x".repeat(99)
      write("big.txt", `${Array.from({ length: 5000 }, () => line).join("\n")}\n`) // 500 KB
      const t = yield* harness(root)
      const r = yield* t.call("read_file", { path: "big.txt" })
      const shown = r.content.split("\n").length
      expect(Buffer.byteLength(r.content)).toBeLessThanOrEqual(256 * 1024)
      expect(Buffer.byteLength(r.content)).toBeGreaterThan(250 * 1024)
      expect(r.end_line).toBe(shown)
      expect(r.total_lines).toBe(5000)
      expect(r.note).toBe(
        `output cut at 256 KiB: showing lines 1-${shown} of 5000; read the rest with offset=${shown + 1}`
      )
      const next = yield* t.call("read_file", { path: "big.txt", offset: shown + 1 })
      expect(next.content.split("\n")[0]).toBe(`${String(shown + 1).padStart(6)}\t${line}`)

      const small = yield* harness(root, { maxReadBytes: 1024 })
      const s = yield* small.call("read_file", { path: "big.txt", offset: 100 })
      expect(s.content.split("\n")).toHaveLength(9) // 9 × 107 bytes fit in 1 KiB
      expect(s.note).toBe("output cut at 1 KiB: showing lines 100-108 of 5000; read the rest with offset=109")

      write("minified.js", `${"y".repeat(5000)}\nshort\n`)
      const m = yield* small.call("read_file", { path: "minified.js" })
      expect(Buffer.byteLength(m.content)).toBeLessThanOrEqual(1024)
      expect(m.content.startsWith("     1\tyyyy")).toBe(true)
      expect(m.note).toBe(
        "line 1 is longer than the 1 KiB output cap and was cut; the file has 2 lines; continue with offset=2"
      )
      write("one-line.min.js", "q".repeat(300_000))
      const one = yield* small.call("read_file", { path: "one-line.min.js" })
      expect(one.content).toBe(`     1\t${"q".repeat(1024 - 7)}`)
      expect(one.total_lines).toBe(1)
      expect(one.note).toBe("line 1 is longer than the 1 KiB output cap and was cut; the file has 1 line")
    })
  )

  it.effect("refuses binary files with a clear message and no content", () =>
    Effect.gen(function* () {
      const { write, root } = setup()
      write("nul.bin", Buffer.from("text\0more text\n"))
      write("latin1.txt", Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a])) // "café" in Latin-1
      const late = Buffer.concat([Buffer.from(`${"ok\n".repeat(100_000)}`), Buffer.from([0xff, 0x0a])])
      write("late.txt", late)
      write("utf8.txt", "café ✓\n")
      const t = yield* harness(root)
      expect(yield* t.error("read_file", { path: "nul.bin" })).toBe(
        "nul.bin is a binary file (it contains NUL bytes, 15 bytes); its content is not shown"
      )
      expect(yield* t.error("read_file", { path: "latin1.txt" })).toBe(
        "latin1.txt is a binary file (it is not valid UTF-8, 5 bytes); its content is not shown"
      )
      expect(yield* t.error("read_file", { path: "late.txt", limit: 1 })).toContain("is not valid UTF-8")
      expect((yield* t.call("read_file", { path: "utf8.txt" })).content).toBe("     1\tcafé ✓")
    })
  )
})

describe("CodingTools: read_file of a file that changes, or is no file", () => {
  it.live.skipIf(process.platform !== "linux")(
    "reads a file as it was when opened: lines appended while it is read are not read",
    () =>
      Effect.gen(function* () {
        const { write, root } = setup()
        const lines = 250_000
        write("grow.log", "0123456789abcdef\n".repeat(lines))
        const file = path.join(root, "grow.log")
        const t = yield* harness(root)
        // once the file is open in this process (seen in /proc/self/fd), append 5 MB to it
        let appended = false
        const timer = setInterval(() => {
          if (appended) return
          for (const fd of fs.readdirSync("/proc/self/fd")) {
            let target = ""
            try {
              target = fs.readlinkSync(`/proc/self/fd/${fd}`)
            } catch {}
            if (target === file) {
              fs.appendFileSync(file, "appended later\n".repeat(350_000))
              appended = true
              return
            }
          }
        }, 1)
        const r = yield* t
          .call("read_file", { path: "grow.log", limit: 1 })
          .pipe(Effect.ensuring(Effect.sync(() => clearInterval(timer))))
        expect(appended).toBe(true)
        expect(r.total_lines).toBe(lines)
        expect(r.content).toBe("     1\t0123456789abcdef")
        // read again, it is the file as it is now
        expect((yield* t.call("read_file", { path: "grow.log", limit: 1 })).total_lines).toBe(lines + 350_000)
      })
  )

  it.live("a FIFO or a directory is refused at once, never waited on", () =>
    Effect.gen(function* () {
      const { root } = setup()
      execFileSync("mkfifo", [path.join(root, "pipe")])
      fs.mkdirSync(path.join(root, "dir"))
      const t = yield* harness(root)
      expect(yield* t.error("read_file", { path: "pipe" }).pipe(Effect.timeout("10 seconds"))).toBe(
        "pipe is not a regular file"
      )
      expect(yield* t.error("read_file", { path: "dir" })).toBe(
        "dir is a directory; use list_files to see its contents"
      )
    })
  )
})

describe("CodingTools: write_file", () => {
  it.effect("creates parent directories and reports hashes and a diff", () =>
    Effect.gen(function* () {
      const { root, read } = setup()
      const t = yield* harness(root)
      const r = yield* t.call("write_file", { path: "a/b/c/new.txt", content: "hello\nworld\n" })
      expect(read("a/b/c/new.txt")).toBe("hello\nworld\n")
      expect(r).toEqual({
        path: "a/b/c/new.txt",
        before: null,
        after: sha("hello\nworld\n"),
        diff: "--- /dev/null\n+++ b/a/b/c/new.txt\n@@ -0,0 +1,2 @@\n+hello\n+world\n",
        added: 2,
        removed: 0
      })
      const r2 = yield* t.call("write_file", { path: "a/b/c/new.txt", content: "hello\nthere" })
      expect(r2.before).toBe(sha("hello\nworld\n"))
      expect(r2.after).toBe(sha("hello\nthere"))
      expect(r2.diff).toBe(
        "--- a/a/b/c/new.txt\n+++ b/a/b/c/new.txt\n@@ -1,2 +1,2 @@\n hello\n-world\n+there\n\\ No newline at end of file\n"
      )
      expect(
        applyPatch(
          "hello\nworld\n",
          r2.diff.replaceAll("a/a/b/c/new.txt", "f.txt").replaceAll("b/a/b/c/new.txt", "f.txt")
        )
      ).toBe("hello\nthere")
      // no temp files are left behind
      expect(fs.readdirSync(path.join(root, "a/b/c"))).toEqual(["new.txt"])
      expect(yield* t.error("write_file", { path: "a/b", content: "x" })).toBe("a/b is a directory")
    })
  )

  it.effect("keeps the file mode and writes through a symlink inside the workspace", () =>
    Effect.gen(function* () {
      const { root, write, read } = setup()
      write("run.sh", "#!/bin/sh\necho 1\n")
      fs.chmodSync(path.join(root, "run.sh"), 0o755)
      fs.symlinkSync("run.sh", path.join(root, "link.sh"))
      const t = yield* harness(root)
      yield* t.call("write_file", { path: "link.sh", content: "#!/bin/sh\necho 2\n" })
      expect(fs.lstatSync(path.join(root, "link.sh")).isSymbolicLink()).toBe(true)
      expect(read("run.sh")).toBe("#!/bin/sh\necho 2\n")
      expect(fs.statSync(path.join(root, "run.sh")).mode & 0o777).toBe(0o755)
    })
  )
})

describe("CodingTools: edit_file", () => {
  it.effect("replaces exact text and reports before/after hashes and a diff that applies", () =>
    Effect.gen(function* () {
      const { root, write, read } = setup()
      const before = "a\nb\nc\nd\ne\nf\ng\nh\n"
      write("f.txt", before)
      const t = yield* harness(root)
      const r = yield* t.call("edit_file", { path: "f.txt", edits: [{ old_text: "d\n", new_text: "D\nD2\n" }] })
      const after = "a\nb\nc\nD\nD2\ne\nf\ng\nh\n"
      expect(read("f.txt")).toBe(after)
      expect(r).toEqual({
        path: "f.txt",
        before: sha(before),
        after: sha(after),
        diff: "--- a/f.txt\n+++ b/f.txt\n@@ -1,7 +1,8 @@\n a\n b\n c\n-d\n+D\n+D2\n e\n f\n g\n",
        added: 2,
        removed: 1
      })
      expect(applyPatch(before, r.diff.replace("--- a/f.txt", "--- f.txt").replace("+++ b/f.txt", "+++ f.txt"))).toBe(
        after
      )
    })
  )

  it.effect("says when old_text is missing or not unique, and leaves the file alone", () =>
    Effect.gen(function* () {
      const { root, write, read } = setup()
      write("src/f.ts", "let x = 1\nlet x = 1\nlet y = 2\n")
      const t = yield* harness(root)
      expect(yield* t.error("edit_file", { path: "src/f.ts", edits: [{ old_text: "let z", new_text: "q" }] })).toBe(
        "old_text not found in src/f.ts; the file was not changed"
      )
      expect(
        yield* t.error("edit_file", { path: "src/f.ts", edits: [{ old_text: "let x = 1", new_text: "let x = 3" }] })
      ).toBe("old_text occurs 2 times in src/f.ts; add context or set replace_all; the file was not changed")
      expect(yield* t.error("edit_file", { path: "src/f.ts", edits: [{ old_text: "", new_text: "q" }] })).toContain(
        "old_text is empty"
      )
      expect(yield* t.error("edit_file", { path: "src/nope.ts", edits: [{ old_text: "a", new_text: "b" }] })).toBe(
        "src/nope.ts does not exist; use write_file to create it"
      )
      expect(yield* t.error("edit_file", { path: "src/f.ts", edits: [] })).toContain("invalid arguments for edit_file")
      expect(read("src/f.ts")).toBe("let x = 1\nlet x = 1\nlet y = 2\n")
      const r = yield* t.call("edit_file", {
        path: "src/f.ts",
        edits: [{ old_text: "let x = 1", new_text: "let x = 3", replace_all: true }]
      })
      expect(read("src/f.ts")).toBe("let x = 3\nlet x = 3\nlet y = 2\n")
      expect(r.diff).toContain("-let x = 1\n-let x = 1\n+let x = 3\n+let x = 3\n")
    })
  )

  it.effect("applies several edits in order, all or nothing", () =>
    Effect.gen(function* () {
      const { root, write, read } = setup()
      write("f.txt", "alpha\nbeta\ngamma\n")
      const t = yield* harness(root)
      // the second edit only matches the result of the first
      yield* t.call("edit_file", {
        path: "f.txt",
        edits: [
          { old_text: "alpha", new_text: "ALPHA one" },
          { old_text: "ALPHA one\nbeta", new_text: "ALPHA two\nBETA" }
        ]
      })
      expect(read("f.txt")).toBe("ALPHA two\nBETA\ngamma\n")
      const message = yield* t.error("edit_file", {
        path: "f.txt",
        edits: [
          { old_text: "gamma", new_text: "GAMMA" },
          { old_text: "delta", new_text: "DELTA" },
          { old_text: "BETA", new_text: "beta" }
        ]
      })
      expect(message).toBe("edit 2 of 3: old_text not found in f.txt; the file was not changed")
      expect(read("f.txt")).toBe("ALPHA two\nBETA\ngamma\n")
    })
  )

  it.effect("preview returns the unified diff without writing; CRLF files and binary files", () =>
    Effect.gen(function* () {
      const { root, write, read } = setup()
      write("f.txt", "one\ntwo\n")
      write("win.txt", "one\r\ntwo\r\nthree\r\n")
      write("bin.dat", Buffer.from([1, 0, 2]))
      const t = yield* harness(root)
      const diff = yield* t.preview("edit_file", { path: "f.txt", edits: [{ old_text: "two", new_text: "2" }] })
      expect(diff).toBe("--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n")
      expect(read("f.txt")).toBe("one\ntwo\n")
      expect(yield* t.preview("edit_file", { path: "f.txt", edits: [{ old_text: "zz", new_text: "2" }] })).toBe(
        "edit_file would fail: old_text not found in f.txt; the file was not changed"
      )
      expect(yield* t.preview("write_file", { path: "g.txt", content: "x\n" })).toBe(
        "--- /dev/null\n+++ b/g.txt\n@@ -0,0 +1 @@\n+x\n"
      )
      expect(fs.existsSync(path.join(root, "g.txt"))).toBe(false)
      yield* t.call("edit_file", { path: "win.txt", edits: [{ old_text: "one\ntwo", new_text: "1\n2" }] })
      expect(read("win.txt")).toBe("1\r\n2\r\nthree\r\n")
      expect(yield* t.error("edit_file", { path: "bin.dat", edits: [{ old_text: "a", new_text: "b" }] })).toBe(
        "bin.dat is a binary file; edit_file only edits text files"
      )
    })
  )

  it.effect("concurrent edits of one file do not lose each other's changes", () =>
    Effect.gen(function* () {
      const { root, write, read } = setup()
      const n = 20
      write("f.txt", Array.from({ length: n }, (_, i) => `item ${i}\n`).join(""))
      const t = yield* harness(root)
      yield* Effect.forEach(
        Array.from({ length: n }, (_, i) => i),
        (i) => t.call("edit_file", { path: "f.txt", edits: [{ old_text: `item ${i}\n`, new_text: `done ${i}\n` }] }),
        { concurrency: "unbounded" }
      )
      expect(read("f.txt")).toBe(Array.from({ length: n }, (_, i) => `done ${i}\n`).join(""))
    })
  )

  it.effect("diffs of random edits apply with patch", () =>
    Effect.gen(function* () {
      const { root, write } = setup()
      const t = yield* harness(root)
      let seed = 42
      const rand = (n: number) => {
        seed = (seed * 1103515245 + 12345) % 2 ** 31
        return seed % n
      }
      const text = (ls: Array<string>) =>
        ls.length > 0 && rand(3) === 0 ? ls.join("\n") : ls.map((l) => `${l}\n`).join("")
      for (let round = 0; round < 80; round++) {
        const lines = Array.from({ length: rand(40) }, () => `l${rand(8)}`)
        const next = [...lines]
        for (let k = rand(6); k > 0; k--) {
          const at = rand(next.length + 1)
          if (rand(2) === 0 && next.length > 0) next.splice(at, 1 + rand(3))
          else next.splice(at, 0, ...Array.from({ length: 1 + rand(3) }, () => `n${rand(8)}`))
        }
        const before = text(lines)
        const after = text(next)
        write("f.txt", before)
        const { diff } = yield* t.call("write_file", { path: "f.txt", content: after })
        if (before === after) expect(diff).toBe("")
        else
          expect(applyPatch(before, diff.replace("--- a/f.txt", "--- f.txt").replace("+++ b/f.txt", "+++ f.txt"))).toBe(
            after
          )
      }
    })
  )
})
