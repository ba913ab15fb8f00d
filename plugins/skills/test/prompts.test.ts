import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { Prompts } from "../src/index.js"

const pkg = fileURLToPath(new URL("../", import.meta.url))
const root = path.resolve(pkg, "../..")
const names = ["planner", "grill", "judge", "goal"] as const

describe("Prompts", () => {
  it("are read from the package's prompts/ folder", () => {
    expect(Prompts.directory).toBe(path.join(pkg, "prompts/"))
    for (const name of names) {
      const text = Prompts.load(name)
      expect(text.length).toBeGreaterThan(200)
      expect(text).toBe(fs.readFileSync(path.join(pkg, "prompts", `${name}.md`), "utf8").trimEnd())
    }
    expect(Prompts.goal()).toContain("{{check}}")
    expect(Prompts.fill("a {{check}} b {{other}}", { check: "X" })).toBe("a X b {{other}}")
  })

  it("are published with the package and found by the built bundle", () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(pkg, "package.json"), "utf8"))
    expect(manifest.files).toEqual(expect.arrayContaining(["dist", "prompts"]))
    const out = path.join(pkg, "dist-check")
    try {
      execFileSync(path.join(root, "node_modules/.bin/tsup"), ["--no-dts", "--out-dir", "dist-check"], {
        cwd: pkg,
        stdio: "pipe"
      })
      const script = `import(${JSON.stringify(path.join(out, "index.js"))}).then((m) => console.log(JSON.stringify({ dir: m.Prompts.directory, texts: ${JSON.stringify(names)}.map((n) => m.Prompts.load(n)) })))`
      const printed = execFileSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
        cwd: root,
        env: { ...process.env, TSX_TSCONFIG_PATH: path.join(root, "tsconfig.json") },
        encoding: "utf8"
      })
      const got = JSON.parse(printed.trim().split("\n").at(-1)!)
      expect(got.dir).toBe(path.join(pkg, "prompts/"))
      expect(got.texts).toEqual(names.map((n) => Prompts.load(n)))
    } finally {
      fs.rmSync(out, { recursive: true, force: true })
    }
  })
})
