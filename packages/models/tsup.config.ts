import { defineConfig } from "tsup"

// One entry per public subpath (`@musekit/models`, `/openai`, `/anthropic`, `/google`,
// `/openai-compatible`): a provider's client is loaded only by the entry that needs it.
export default defineConfig({
  entry: ["src/index.ts", "src/OpenAi.ts", "src/Anthropic.ts", "src/Google.ts", "src/OpenAiCompatible.ts"],
  format: ["esm"],
  dts: true,
  clean: true,
  sourcemap: true,
  splitting: true,
  target: "node20"
})
