import { defineConfig } from "tsup"

// One entry per public subpath (`@musekit/models`, `/openai`, `/anthropic`, `/google`,
// `/openai-compatible`): a provider's client is loaded only by the entry that needs it.
export default defineConfig({
  // one entry per public module (`@musekit/x/Module`), so declarations elsewhere can name its types
  entry: ["src/*.ts"],
  format: ["esm"],
  // declarations come from tsc (tsconfig.build.json): one .d.ts per module with its own names, no hashed chunks
  dts: false,
  clean: true,
  sourcemap: true,
  splitting: true,
  target: "node20"
})
