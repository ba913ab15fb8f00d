import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Workspace } from "@musekit/core"
import { Effect, Either } from "effect"
import { WorkspaceNode } from "../src/index.js"

/** A fresh real temp dir holding `ws/` (the workspace) and `outside/` (a sibling). */
const setup = () => {
  const base = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "muse-ws-")))
  const root = path.join(base, "ws")
  const outside = path.join(base, "outside")
  fs.mkdirSync(path.join(root, "src"), { recursive: true })
  fs.mkdirSync(outside)
  fs.writeFileSync(path.join(root, "src", "a.txt"), "alpha\n")
  fs.writeFileSync(path.join(outside, "secret.txt"), "secret\n")
  return { base, root, outside }
}

const sha = (s: string | Buffer) => createHash("sha256").update(s).digest("hex")

const escapeOf = (ws: Workspace.Service, p: string) =>
  Effect.map(Effect.either(ws.resolve(p)), (e) => {
    if (Either.isRight(e)) throw new Error(`expected ${JSON.stringify(p)} to be refused, got ${e.right}`)
    return e.left
  })

describe("WorkspaceNode", () => {
  it.effect("resolves paths inside the real root", () =>
    Effect.gen(function* () {
      const { root } = setup()
      const ws = yield* WorkspaceNode.make(root)
      expect(ws.root).toBe(root)
      expect(yield* ws.resolve("src/a.txt")).toBe(path.join(root, "src/a.txt"))
      expect(yield* ws.resolve("./src/../src/new/file.ts")).toBe(path.join(root, "src/new/file.ts"))
      expect(yield* ws.resolve(".")).toBe(root)
      expect(yield* ws.resolve("")).toBe(root)
      expect(yield* ws.resolve(path.join(root, "src/a.txt"))).toBe(path.join(root, "src/a.txt"))
      expect(ws.relative(path.join(root, "src/a.txt"))).toBe("src/a.txt")
      expect(ws.relative(root)).toBe(".")
    })
  )

  it.effect("takes the real path of a root given through a symlink", () =>
    Effect.gen(function* () {
      const { base, root } = setup()
      const link = path.join(base, "link-to-ws")
      fs.symlinkSync(root, link)
      const ws = yield* WorkspaceNode.make(link)
      expect(ws.root).toBe(root)
      // absolute paths written against the given root are accepted and mapped to the real one
      expect(yield* ws.resolve(path.join(link, "src/a.txt"))).toBe(path.join(root, "src/a.txt"))
      expect(ws.relative(path.join(link, "src/a.txt"))).toBe("src/a.txt")
    })
  )

  it.effect("refuses '..' escapes, absolute paths outside and NUL bytes", () =>
    Effect.gen(function* () {
      const { root, outside } = setup()
      const ws = yield* WorkspaceNode.make(root)
      for (const p of ["..", "../outside/secret.txt", "src/../../outside", "src/../../ws-sibling"]) {
        const e = yield* escapeOf(ws, p)
        expect(e._tag).toBe("PathEscape")
        expect(e.reason).toBe("'..' leads out")
        expect(e.message).toBe(
          `path ${p} is outside the workspace ${root} ('..' leads out); nothing was read or written`
        )
      }
      for (const p of ["/etc/passwd", path.join(outside, "secret.txt"), `${root}-other/x`, "/"]) {
        expect((yield* escapeOf(ws, p)).reason).toBe("absolute path outside")
      }
      expect((yield* escapeOf(ws, "src/a\0.txt")).reason).toBe("NUL byte in path")
    })
  )

  it("symlinkEscape with anyLink refuses every link on the way, also those that stay inside or dangle", () => {
    const { root } = setup()
    fs.symlinkSync(path.join(root, "src"), path.join(root, "inner"))
    fs.symlinkSync(path.join(root, "src", "a.txt"), path.join(root, "file-link"))
    fs.symlinkSync(path.join(root, "nowhere"), path.join(root, "dangling"))
    // links that stay inside are fine for reading
    expect(WorkspaceNode.symlinkEscape(root, path.join(root, "inner", "a.txt"))).toBeUndefined()
    expect(WorkspaceNode.symlinkEscape(root, path.join(root, "file-link"))).toBeUndefined()
    const any = (rel: string) => WorkspaceNode.symlinkEscape(root, path.join(root, rel), { anyLink: true })
    expect(any("inner/a.txt")).toContain("a symlink on the path leads to")
    expect(any("inner/new/b.txt")).toContain("a symlink on the path leads to")
    expect(any("file-link")).toContain("a symlink on the path leads to")
    expect(any("dangling")).toContain("a symlink at")
    expect(any("dangling/x")).toContain("a symlink at")
    // plain files and paths not created yet
    expect(any("src/a.txt")).toBeUndefined()
    expect(any("src/new/deeper.txt")).toBeUndefined()
  })

  it.effect("refuses symlinks that lead out: to /etc, a directory outside, dangling ones, relative ones", () =>
    Effect.gen(function* () {
      const { root, outside } = setup()
      fs.symlinkSync("/etc", path.join(root, "etc"))
      fs.symlinkSync("/etc/passwd", path.join(root, "passwd"))
      fs.symlinkSync(outside, path.join(root, "out"))
      fs.symlinkSync(path.join(outside, "not-yet.txt"), path.join(root, "dangling"))
      fs.symlinkSync("../../outside/secret.txt", path.join(root, "src", "rel-secret"))
      fs.symlinkSync("../../outside/nope/deeper", path.join(root, "src", "rel-dangling"))
      fs.symlinkSync("dangling", path.join(root, "chain"))
      const ws = yield* WorkspaceNode.make(root)
      const cases = [
        "etc",
        "etc/passwd",
        "passwd",
        "out",
        "out/secret.txt",
        "out/new-file.txt",
        "out/new/dir/file.txt",
        "dangling",
        "chain",
        "src/rel-secret",
        "src/rel-dangling",
        "src/rel-dangling/x",
        path.join(root, "out/secret.txt")
      ]
      for (const p of cases) {
        const e = yield* escapeOf(ws, p)
        expect(e.reason, p).toMatch(/^a symlink leads to /)
        expect(e.message).toContain("is outside the workspace")
      }
      expect(fs.readdirSync(outside)).toEqual(["secret.txt"])
    })
  )

  it.effect("allows symlinks that stay inside, refuses loops", () =>
    Effect.gen(function* () {
      const { root } = setup()
      fs.symlinkSync("src", path.join(root, "alias"))
      fs.symlinkSync("src/a.txt", path.join(root, "a-link"))
      fs.symlinkSync("src/later.txt", path.join(root, "later-link"))
      fs.symlinkSync("loop2", path.join(root, "loop1"))
      fs.symlinkSync("loop1", path.join(root, "loop2"))
      const ws = yield* WorkspaceNode.make(root)
      expect(yield* ws.resolve("alias/a.txt")).toBe(path.join(root, "alias/a.txt"))
      expect(yield* ws.resolve("alias/new.txt")).toBe(path.join(root, "alias/new.txt"))
      expect(yield* ws.resolve("a-link")).toBe(path.join(root, "a-link"))
      expect(yield* ws.resolve("later-link")).toBe(path.join(root, "later-link"))
      expect((yield* escapeOf(ws, "loop1")).reason).toMatch(/symlink loop|too many levels/)
    })
  )

  it.effect("fingerprints files by content, directories by listing, missing and outside paths as null", () =>
    Effect.gen(function* () {
      const { root } = setup()
      fs.writeFileSync(path.join(root, "bin.dat"), Buffer.from([0, 1, 2, 255]))
      fs.symlinkSync("/etc/passwd", path.join(root, "passwd"))
      const ws = yield* WorkspaceNode.make(root)
      const fp = yield* ws.fingerprint([
        "src/a.txt",
        "bin.dat",
        "missing.txt",
        "src",
        "../outside/secret.txt",
        "passwd"
      ])
      expect(fp).toEqual({
        "src/a.txt": sha("alpha\n"),
        "bin.dat": sha(Buffer.from([0, 1, 2, 255])),
        "missing.txt": null,
        src: sha("a.txt"),
        "../outside/secret.txt": null,
        passwd: null
      })
      fs.mkdirSync(path.join(root, "src", "sub"))
      const again = yield* ws.fingerprint(["src", "src/a.txt"])
      expect(again.src).toBe(sha("a.txt\nsub/"))
      expect(again["src/a.txt"]).toBe(fp["src/a.txt"])
      fs.writeFileSync(path.join(root, "src", "a.txt"), "alpha!\n")
      expect((yield* ws.fingerprint(["src/a.txt"]))["src/a.txt"]).toBe(sha("alpha!\n"))
    })
  )

  it.effect("refuses a missing root or a file as root", () =>
    Effect.gen(function* () {
      const { root } = setup()
      const missing = yield* Effect.flip(WorkspaceNode.make(path.join(root, "nope")))
      expect(missing._tag).toBe("InvalidRoot")
      expect(missing.message).toBe(`cannot use ${path.join(root, "nope")} as a workspace root: it does not exist`)
      const file = yield* Effect.flip(WorkspaceNode.make(path.join(root, "src/a.txt")))
      expect(file.message).toContain("not a directory")
    })
  )

  it.effect("layer provides the Workspace service", () =>
    Effect.gen(function* () {
      const ws = yield* Workspace.Workspace
      expect(yield* ws.resolve("x")).toBe(path.join(ws.root, "x"))
    }).pipe(Effect.provide(WorkspaceNode.layer(setup().root)))
  )
})
