/** `.sql` files are bundled as text modules (wrangler.toml `[[rules]] type = "Text"`): migrations/*.sql. */
declare module "*.sql" {
  const text: string;
  export default text;
}
