import { readFileSync } from "node:fs"
import { defineConfig } from "tsup"

const pkg = JSON.parse(readFileSync(new URL("./package.json", import.meta.url), "utf8")) as { version: string }

export default defineConfig({
  // one entry per public module (`@musekit/x/Module`), so declarations elsewhere can name its types
  entry: ["src/*.ts"],
  external: ["@musekit/models"],
  format: ["esm"],
  // declarations come from tsc (tsconfig.build.json): one .d.ts per module with its own names, no hashed chunks
  dts: false,
  clean: true,
  sourcemap: true,
  target: "node20",
  // HttpClientNode's default user-agent, `musekit/<version>`
  define: { __MUSEKIT_NODE_VERSION__: JSON.stringify(pkg.version) }
})
