import { readFileSync, writeFileSync } from "node:fs"
import { defineConfig } from "tsup"

// tsup bundles code only: the text of prompts/summary.md is compiled into src/internal/prompts.ts
// (a plain string module, written in the repository's format) before each build, so src (vitest)
// and dist read the same prompt. test/prompts.test.ts fails when the module is out of date.
const quote = (s: string) => {
  const doubles = s.split('"').length - 1
  const singles = s.split("'").length - 1
  if (doubles <= singles) return JSON.stringify(s)
  return `'${JSON.stringify(s).slice(1, -1).replaceAll('\\"', '"').replaceAll("'", "\\'")}'`
}
const lines = readFileSync("prompts/summary.md", "utf8").split("\n")
const generated = `// Generated from prompts/summary.md by tsup.config.ts; do not edit by hand.

/** The compactor's system prompt: the text of prompts/summary.md. */
export const summary: string = [
${lines.map((l) => `  ${quote(l)}`).join(",\n")}
].join("\\n")
`
const target = "src/internal/prompts.ts"
let current = ""
try {
  current = readFileSync(target, "utf8")
} catch {}
if (current !== generated) writeFileSync(target, generated)

export default defineConfig({
  // one entry per public module (`@musekit/x/Module`), so declarations elsewhere can name its types
  entry: ["src/*.ts"],
  format: ["esm"],
  // declarations come from tsc (tsconfig.build.json): one .d.ts per module with its own names, no hashed chunks
  dts: false,
  clean: true,
  sourcemap: true,
  target: "node20"
})
