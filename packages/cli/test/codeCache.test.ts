import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { beforeAll, describe, expect, it } from "vitest"
import { cacheDirs, loadScript, sumFile, writeScriptSum } from "../src/internal/codeCache.js"
import { buggyRepo, ensureBuilt, fixScript, muse, sandbox, writeScript } from "./support/cli.js"

const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), "muse-code-cache-"))

/** A CommonJS script big enough for V8 to cache, whose answer shows it ran (and with what). */
const writeModule = (dir: string, answer: string): string => {
  const file = path.join(dir, "mod.cjs")
  const fns = Array.from({ length: 200 }, (_, i) => `function f${i}(x) { return x + ${i} }`).join("\n")
  fs.writeFileSync(
    file,
    `${fns}\nconst here = require("node:path").basename(__filename)\nmodule.exports = { answer: ${JSON.stringify(answer)}, here, sum: f199(1) + f0(1) }\n`
  )
  return file
}

const cacheFiles = (dir: string) => (fs.existsSync(dir) ? fs.readdirSync(dir).filter((n) => n.endsWith(".bin")) : [])

describe("code cache", () => {
  it("compiles without a cache, writes one, and the next load uses it with the same result", () => {
    const dir = tmp()
    const file = writeModule(dir, "first")
    const cache = path.join(dir, "cache")
    const a = loadScript(file, { dirs: [cache] })
    expect(a.cache).toBe("missing")
    expect(a.exports).toEqual({ answer: "first", here: "mod.cjs", sum: 201 })
    expect(a.persist()).toBe(true)
    expect(cacheFiles(cache)).toHaveLength(1)
    const b = loadScript(file, { dirs: [cache] })
    expect(b.cache).toBe("hit")
    expect(b.exports).toEqual(a.exports)
    expect(b.persist()).toBe(false)
  })

  it("a corrupt or truncated cache is not handed to V8: the script still runs and the cache is rewritten", () => {
    const dir = tmp()
    const file = writeModule(dir, "still right")
    const cache = path.join(dir, "cache")
    loadScript(file, { dirs: [cache] }).persist()
    const [name] = cacheFiles(cache)
    const cached = path.join(cache, name!)
    const good = fs.readFileSync(cached)

    const flipped = Buffer.from(good)
    flipped[flipped.length - 10] = flipped[flipped.length - 10]! ^ 0xff
    fs.writeFileSync(cached, flipped)
    const c = loadScript(file, { dirs: [cache] })
    expect(c.cache).toBe("corrupt")
    expect(c.exports).toEqual({ answer: "still right", here: "mod.cjs", sum: 201 })
    expect(c.persist()).toBe(true)
    expect(loadScript(file, { dirs: [cache] }).cache).toBe("hit")

    for (const bytes of [good.subarray(0, 30), Buffer.alloc(0), Buffer.from("not a cache at all")]) {
      fs.writeFileSync(cached, bytes)
      const d = loadScript(file, { dirs: [cache] })
      expect(d.cache).toBe("corrupt")
      expect(d.exports).toEqual({ answer: "still right", here: "mod.cjs", sum: 201 })
    }
  })

  it("a well-formed cache V8 will not take (another script's) is rejected and the script compiles from source", () => {
    const dir = tmp()
    const other = path.join(dir, "other")
    fs.mkdirSync(other)
    const cache = path.join(dir, "cache")
    // the other script's cache, under this script's name
    const otherFile = path.join(other, "mod.cjs")
    fs.writeFileSync(otherFile, "module.exports = { answer: 'other' }\n")
    const first = loadScript(otherFile, { dirs: [path.join(dir, "other-cache")] })
    first.persist()
    // (the name of this script's cache, from a copy elsewhere: V8 keeps what it compiled in
    // memory by file name, and the load below must compile)
    const copy = path.join(dir, "copy")
    fs.mkdirSync(copy)
    const mine = loadScript(writeModule(copy, "mine"), { dirs: [cache] })
    const file = writeModule(dir, "mine")
    const [name] = cacheFiles(path.join(dir, "other-cache"))
    fs.mkdirSync(cache, { recursive: true })
    fs.copyFileSync(path.join(dir, "other-cache", name!), path.join(cache, path.basename(mine.cacheFile!)))
    const r = loadScript(file, { dirs: [cache] })
    expect(r.cache).toBe("rejected")
    expect(r.exports).toEqual({ answer: "mine", here: "mod.cjs", sum: 201 })
    expect(r.persist()).toBe(true)
    expect(loadScript(file, { dirs: [cache] }).cache).toBe("hit")
  })

  it("a cache others can write (the file, or its folder) or a link in its place is not run; writing never follows a planted link", () => {
    const dir = tmp()
    const file = writeModule(dir, "trusted")
    const cache = path.join(dir, "cache")
    loadScript(file, { dirs: [cache] }).persist()
    const [name] = cacheFiles(cache)
    const cached = path.join(cache, name!)
    expect(loadScript(file, { dirs: [cache] }).cache).toBe("hit")

    fs.chmodSync(cached, 0o666)
    const a = loadScript(file, { dirs: [cache] })
    expect(a.cache).toBe("untrusted")
    expect(a.exports).toEqual({ answer: "trusted", here: "mod.cjs", sum: 201 })
    fs.chmodSync(cached, 0o644)
    fs.chmodSync(cache, 0o777)
    expect(loadScript(file, { dirs: [cache] }).cache).toBe("untrusted")
    // nor is one written into such a folder
    fs.rmSync(cached)
    expect(loadScript(file, { dirs: [cache] }).persist()).toBe(false)
    fs.chmodSync(cache, 0o700)

    // a link where the cache would be: not read, and the write replaces the link, not its target
    const target = path.join(dir, "target.bin")
    fs.writeFileSync(target, "someone else's file\n")
    fs.symlinkSync(target, cached)
    const b = loadScript(file, { dirs: [cache] })
    expect(b.cache).toBe("missing")
    expect(b.persist()).toBe(true)
    expect(fs.readFileSync(target, "utf8")).toBe("someone else's file\n")
    expect(fs.lstatSync(cached).isSymbolicLink()).toBe(false)
    expect(loadScript(file, { dirs: [cache] }).cache).toBe("hit")
  })

  it("a new build of the script never reads the old cache; writing one removes caches unwritten for a week", () => {
    const dir = tmp()
    const cache = path.join(dir, "cache")
    const file = writeModule(dir, "build one")
    loadScript(file, { dirs: [cache] }).persist()
    const [one] = cacheFiles(cache)
    writeModule(dir, "build two") // same length, other content
    const two = loadScript(file, { dirs: [cache] })
    expect(two.cache).toBe("missing")
    expect((two.exports as { answer: string }).answer).toBe("build two")
    two.persist()
    // another install may share the folder: a recent cache of another build stays
    expect(cacheFiles(cache).sort()).toEqual([one!, path.basename(two.cacheFile!)].sort())
    const weekOld = new Date(Date.now() - 8 * 24 * 60 * 60 * 1000)
    fs.utimesSync(path.join(cache, one!), weekOld, weekOld)
    writeModule(dir, "build six")
    loadScript(file, { dirs: [cache] }).persist()
    expect(cacheFiles(cache)).not.toContain(one)
    expect(cacheFiles(cache)).toContain(path.basename(two.cacheFile!))
  })

  it("an unwritable folder falls through to the next; with none writable the script still runs", () => {
    const dir = tmp()
    const file = writeModule(dir, "runs")
    const blocker = path.join(dir, "a-file")
    fs.writeFileSync(blocker, "")
    const unwritable = path.join(blocker, "cache") // a folder inside a file cannot be made
    const writable = path.join(dir, "fallback")
    const a = loadScript(file, { dirs: [unwritable, writable] })
    expect(a.persist()).toBe(true)
    expect(cacheFiles(writable)).toHaveLength(1)
    expect(loadScript(file, { dirs: [unwritable, writable] }).cache).toBe("hit")

    const b = loadScript(file, { dirs: [unwritable] })
    expect(b.cache).toBe("missing")
    expect(b.exports).toEqual({ answer: "runs", here: "mod.cjs", sum: 201 })
    expect(b.persist()).toBe(false)
    expect(fs.readdirSync(dir).filter((n) => n.endsWith(".tmp"))).toEqual([])

    const off = loadScript(file, { dirs: [writable], enabled: false })
    expect(off.cache).toBe("off")
    expect(off.persist()).toBe(false)
  })

  it("the build's sum names the cache; a missing, stale or garbled sum is computed again and the right code runs", () => {
    const dir = tmp()
    const cache = path.join(dir, "cache")
    const file = writeModule(dir, "summed")
    const computed = loadScript(file, { dirs: [cache] })
    computed.persist()
    writeScriptSum(file)
    expect(fs.readFileSync(sumFile(file), "latin1")).toMatch(/^muse-script-sum-1 \d+ [0-9a-f]{8} ascii\n$/)
    // the sum names the same cache the computed CRC-32 did
    const summed = loadScript(file, { dirs: [cache] })
    expect(summed.cacheFile).toBe(computed.cacheFile)
    expect(summed.cache).toBe("hit")
    // a sum the start reads is believed: one that lies (same length) names another cache
    const liar = fs.readFileSync(sumFile(file), "latin1").replace(/ [0-9a-f]{8} /, " 00000000 ")
    fs.writeFileSync(sumFile(file), liar)
    expect(path.basename(loadScript(file, { dirs: [cache] }).cacheFile!)).toContain("-00000000-")

    // the script rebuilt after its sum (another answer, same length): the sum is older, so it is computed
    writeScriptSum(file)
    const later = new Date(Date.now() + 5000)
    writeModule(dir, "rebuilt")
    fs.utimesSync(file, later, later)
    const rebuilt = loadScript(file, { dirs: [cache] })
    expect(rebuilt.exports).toEqual({ answer: "rebuilt", here: "mod.cjs", sum: 201 })
    expect(rebuilt.cache).toBe("missing")
    expect(rebuilt.cacheFile).not.toBe(computed.cacheFile)

    // changed after its sum with the same length and its modification time set back to the sum's
    // (`touch -r`): its change time still says so, and it is computed
    writeModule(dir, "rebuilt")
    writeScriptSum(file)
    const fresh = loadScript(file, { dirs: [cache] })
    fresh.persist()
    const sumTime = fs.statSync(sumFile(file)).mtime
    const tick = Date.now() + 30
    while (Date.now() < tick) {
      // the next change lands on a later clock tick than the sum's
    }
    writeModule(dir, "touched")
    fs.utimesSync(file, sumTime, sumTime)
    const touched = loadScript(file, { dirs: [cache] })
    expect(touched.exports).toEqual({ answer: "touched", here: "mod.cjs", sum: 201 })
    expect(touched.cacheFile).not.toBe(fresh.cacheFile)
    writeModule(dir, "rebuilt")
    fs.utimesSync(file, later, later)

    // of another length, garbled, or missing: computed, and the same as without a sum
    for (const text of [
      fs.readFileSync(sumFile(file), "latin1").replace(/ \d+ /, " 7 "),
      "muse-script-sum-1 garbage\n",
      undefined
    ]) {
      if (text === undefined) fs.rmSync(sumFile(file))
      else {
        fs.writeFileSync(sumFile(file), text)
        fs.utimesSync(sumFile(file), later, later)
      }
      const r = loadScript(file, { dirs: [cache] })
      expect(r.cacheFile).toBe(rebuilt.cacheFile)
      expect(r.exports).toEqual({ answer: "rebuilt", here: "mod.cjs", sum: 201 })
    }
  })

  it("Node or V8 flags (command line or NODE_OPTIONS) name a cache of their own", () => {
    const dir = tmp()
    const cache = path.join(dir, "cache")
    const file = writeModule(dir, "flags")
    const before = process.env.NODE_OPTIONS
    try {
      delete process.env.NODE_OPTIONS
      const plain = loadScript(file, { dirs: [cache] })
      plain.persist()
      process.env.NODE_OPTIONS = "--max-semi-space-size=32"
      const flagged = loadScript(file, { dirs: [cache] })
      expect(flagged.cacheFile).not.toBe(plain.cacheFile)
      expect(flagged.cache).toBe("missing")
      expect(flagged.persist()).toBe(true)
      expect(loadScript(file, { dirs: [cache] }).cache).toBe("hit")
      // both stay: alternating runs do not rewrite each other's cache
      delete process.env.NODE_OPTIONS
      expect(loadScript(file, { dirs: [cache] }).cache).toBe("hit")
      expect(cacheFiles(cache)).toHaveLength(2)
    } finally {
      if (before === undefined) delete process.env.NODE_OPTIONS
      else process.env.NODE_OPTIONS = before
    }
  })

  it("cacheDirs: beside the bundle, then the user's cache folder; MUSE_CODE_CACHE_DIR replaces both", () => {
    expect(cacheDirs("/opt/muse/dist/boot.cjs", { HOME: "/home/u" })).toEqual([
      "/opt/muse/dist/.code-cache",
      "/home/u/.cache/muse/code-cache"
    ])
    expect(cacheDirs("/opt/muse/dist/boot.cjs", { HOME: "/home/u", XDG_CACHE_HOME: "/xdg" })).toEqual([
      "/opt/muse/dist/.code-cache",
      "/xdg/muse/code-cache"
    ])
    expect(cacheDirs("/opt/muse/dist/boot.cjs", { XDG_CACHE_HOME: "relative" })).toEqual(["/opt/muse/dist/.code-cache"])
    expect(cacheDirs("/opt/muse/dist/boot.cjs", { HOME: "/home/u", MUSE_CODE_CACHE_DIR: "/c" })).toEqual(["/c"])
  })
})

describe("muse with its code cache", () => {
  beforeAll(() => ensureBuilt(), 240_000)

  it("fixes the same bug with no cache, with the cache, with a corrupt cache and with the cache off; each log replays exactly", () => {
    const sb = sandbox()
    const cache = path.join(sb.root, "code-cache")
    const env = { MUSE_CODE_CACHE_DIR: cache, MUSE_DEBUG_CODE_CACHE: "1" }
    const run = (expected: string, extra: NodeJS.ProcessEnv = {}) => {
      const repo = buggyRepo(sb.root)
      const script = writeScript(sb, "fix", fixScript())
      const r = muse(
        [
          "run",
          "The unit test fails. Fix it.",
          "--script",
          script,
          "--allow",
          "run_shell:npm test",
          "--output-format",
          "json"
        ],
        { sb, cwd: repo, env: { ...env, ...extra } }
      )
      expect(r.code, r.stderr).toBe(0)
      expect(r.stderr).toContain(`muse: code cache ${expected}`)
      expect(fs.readFileSync(path.join(repo, "sum.js"), "utf8")).toBe("export const sum = (a, b) => a + b\n")
      const out = JSON.parse(r.stdout) as { session: string; text: string }
      expect(out.text).toContain("Fixed: sum adds and npm test passes.")
      const replay = muse(["replay", out.session, "--verify"], { sb, env: { MUSE_CODE_CACHE: "0" } })
      expect(replay.code, replay.stderr).toBe(0)
    }
    run("missing")
    expect(cacheFiles(cache)).toHaveLength(1) // written at exit at the latest
    run("hit")
    const cached = path.join(cache, cacheFiles(cache)[0]!)
    const bytes = fs.readFileSync(cached)
    bytes[bytes.length - 1] = bytes[bytes.length - 1]! ^ 0xff
    fs.writeFileSync(cached, bytes)
    run("corrupt")
    run("off", { MUSE_CODE_CACHE: "0" })
  }, 240_000)
})
