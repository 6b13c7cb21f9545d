/* GET /: the dashboard, one page with inline CSS, JavaScript and SVG
 * (dashboard.html, embedded at build time) that polls the JSON API. The
 * page itself holds no data, so it is served without the admin token; its
 * requests to /api/ carry the token. */
#include "http_internal.h"

#include "http_dashboard_html.h" /* generated: DASHBOARD_HTML, _LEN */

void http_dashboard(const http_request *req, http_response *res) {
  (void)req;
  res->status = MHD_HTTP_OK;
  res->type = "text/html; charset=utf-8";
  res->body = (char *)DASHBOARD_HTML;
  res->len = DASHBOARD_HTML_LEN;
  res->body_static = 1;
}
