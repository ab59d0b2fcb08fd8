# api.example.com: the JSON API, version 1 on the api_v1 pool, version 2 on one local service.
server {
    listen 443 ssl http2;
    listen [::]:443 ssl http2;
    server_name api.example.com;

    ssl_certificate /etc/letsencrypt/live/api.example.com/fullchain.pem;
    ssl_certificate_key /etc/letsencrypt/live/api.example.com/privkey.pem;
    include /etc/letsencrypt/options-ssl-nginx.conf;

    add_header Strict-Transport-Security "max-age=31536000; includeSubDomains" always;

    proxy_set_header Host $host;
    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    proxy_set_header X-Forwarded-Proto $scheme;
    proxy_set_header X-Api-Gateway edge;
    proxy_read_timeout 120s;
    proxy_connect_timeout 5s;

    if ($request_method = TRACE) {
        return 405;
    }

    location /v1/ {
        proxy_pass http://api_v1;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_set_header X-Api-Version 1;
    }

    location /v2/ {
        proxy_pass http://127.0.0.1:9100/;
    }

    location / {
        default_type application/json;
        return 404 '{"error": "not found"}';
    }
}
