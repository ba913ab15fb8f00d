/**
 * What the example runs with no API key: a small repository whose unit test fails, and a scripted model that fixes
 * it the way a good model would (read, edit, run the tests, stop).
 *
 * @example
 * ```ts
 * import { demoModel, makeDemoRepo } from "./demo.js"
 *
 * const dir = makeDemoRepo()
 * ```
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { routed, Scripted, scriptedModel } from "@musekit/core/testing"

export const makeDemoRepo = (): string => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "muse-demo-"))
  fs.writeFileSync(
    path.join(dir, "package.json"),
    `${JSON.stringify({ name: "demo", private: true, type: "module", scripts: { test: "node --test" } }, null, 2)}\n`
  )
  fs.writeFileSync(path.join(dir, "sum.js"), "export const sum = (a, b) => a - b\n")
  fs.writeFileSync(
    path.join(dir, "sum.test.js"),
    'import { test } from "node:test"\nimport assert from "node:assert"\nimport { sum } from "./sum.js"\n\ntest("adds", () => assert.strictEqual(sum(2, 3), 5))\n'
  )
  execFileSync("git", ["init", "-q", "-b", "main"], { cwd: dir })
  return dir
}

export const demoModel = () =>
  scriptedModel([
    routed({
      main: (c) => {
        if (c.turn === 0)
          return Scripted.toolCalls([{ name: "read_file", params: { path: "sum.js" } }], {
            text: "Let me look at sum.js."
          })
        if (c.turn === 1) {
          return Scripted.toolCalls(
            [{ name: "edit_file", params: { path: "sum.js", edits: [{ old_text: "a - b", new_text: "a + b" }] } }],
            { text: "sum subtracts; it should add." }
          )
        }
        if (c.turn === 2) return Scripted.toolCalls([{ name: "run_shell", params: { command: "npm test" } }])
        const exit = (c.lastResults[0]?.result as { exit_code?: number } | undefined)?.exit_code
        return Scripted.text(exit === 0 ? "Fixed sum.js; npm test passes." : `npm test still fails (exit ${exit}).`)
      }
    })
  ]).layer
