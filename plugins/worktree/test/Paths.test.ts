import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Paths } from "../src/index.js"
import { tmpDir } from "./helpers.js"

const setup = () => {
  const base = tmpDir("muse-paths-")
  const root = path.join(base, "ws")
  const outside = path.join(base, "outside")
  fs.mkdirSync(path.join(root, "src", "deep"), { recursive: true })
  fs.mkdirSync(outside)
  fs.writeFileSync(path.join(root, "src", "a.ts"), "a")
  fs.writeFileSync(path.join(outside, "secret"), "s")
  fs.symlinkSync(outside, path.join(root, "out-dir"))
  fs.symlinkSync(path.join(outside, "secret"), path.join(root, "out-file"))
  fs.symlinkSync(path.join(outside, "not-yet"), path.join(root, "dangling-out"))
  fs.symlinkSync(path.join(root, "src"), path.join(root, "in-dir"))
  fs.symlinkSync("../outside", path.join(root, "relative-out"))
  fs.symlinkSync("loop-b", path.join(root, "loop-a"))
  fs.symlinkSync("loop-a", path.join(root, "loop-b"))
  return { base, root, outside }
}

const refused = (root: string, p: string) =>
  Effect.map(Effect.flip(Paths.resolveInside(root, p)), (e) => {
    expect(e).toBeInstanceOf(Paths.PathEscape)
    expect(e.message).toBe(`path ${p} is outside the workspace ${root}`)
    expect({ path: e.path, root: e.root }).toEqual({ path: p, root })
  })

describe("Paths.resolveInside", () => {
  it.effect("resolves relative and absolute paths inside the root", () =>
    Effect.gen(function* () {
      const { root } = setup()
      expect(yield* Paths.resolveInside(root, "src/a.ts")).toBe(path.join(root, "src/a.ts"))
      expect(yield* Paths.resolveInside(root, "./src/../src/deep")).toBe(path.join(root, "src/deep"))
      expect(yield* Paths.resolveInside(root, path.join(root, "src/a.ts"))).toBe(path.join(root, "src/a.ts"))
      expect(yield* Paths.resolveInside(root, ".")).toBe(root)
      expect(yield* Paths.resolveInside(root, "..dotdot-name")).toBe(path.join(root, "..dotdot-name"))
      // files that do not exist yet are judged by the directory they would be created in
      expect(yield* Paths.resolveInside(root, "new/dir/file.ts")).toBe(path.join(root, "new/dir/file.ts"))
      // symlinks that stay inside are fine
      expect(yield* Paths.resolveInside(root, "in-dir/a.ts")).toBe(path.join(root, "in-dir/a.ts"))
    })
  )

  it.effect("refuses .. escapes", () =>
    Effect.gen(function* () {
      const { root } = setup()
      yield* refused(root, "..")
      yield* refused(root, "../outside/secret")
      yield* refused(root, "src/../../outside")
      yield* refused(root, "src/deep/../../../ws-sibling")
    })
  )

  it.effect("refuses absolute paths outside the root, including a sibling with the same prefix", () =>
    Effect.gen(function* () {
      const { root, outside } = setup()
      yield* refused(root, "/etc/passwd")
      yield* refused(root, path.join(outside, "secret"))
      yield* refused(root, `${root}-sibling/file`)
    })
  )

  it.effect("refuses symlinks leading out: directories, files, dangling and relative links, loops", () =>
    Effect.gen(function* () {
      const { root } = setup()
      yield* refused(root, "out-dir")
      yield* refused(root, "out-dir/secret")
      yield* refused(root, "out-dir/new/file.txt")
      yield* refused(root, "out-file")
      yield* refused(root, "dangling-out")
      yield* refused(root, "relative-out/secret")
      yield* refused(root, "loop-a/x")
      yield* refused(root, "with\0nul")
    })
  )

  it.effect("works for a root reached through a symlink", () =>
    Effect.gen(function* () {
      const { base, root } = setup()
      const alias = path.join(base, "alias")
      fs.symlinkSync(root, alias)
      expect(yield* Paths.resolveInside(alias, "src/a.ts")).toBe(path.join(alias, "src/a.ts"))
      yield* refused(alias, "out-dir/secret")
      yield* refused(alias, "../outside")
    })
  )
})
