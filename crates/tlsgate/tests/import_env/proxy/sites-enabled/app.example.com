# app.example.com and www.example.com: the web application.
server {
    listen 443 ssl http2;
    listen [::]:443 ssl http2;
    server_name app.example.com www.example.com;

    # ECDSA first; RSA for older clients.
    ssl_certificate /etc/letsencrypt/live/app.example.com/fullchain.pem; # managed by Certbot
    ssl_certificate_key /etc/letsencrypt/live/app.example.com/privkey.pem; # managed by Certbot
    ssl_certificate /etc/letsencrypt/live/app.example.com-rsa/fullchain.pem;
    ssl_certificate_key /etc/letsencrypt/live/app.example.com-rsa/privkey.pem;
    include /etc/letsencrypt/options-ssl-nginx.conf; # managed by Certbot

    add_header Strict-Transport-Security "max-age=31536000; includeSubDomains" always;
    add_header X-Content-Type-Options nosniff;

    client_max_body_size 20m;

    location / {
        proxy_pass http://app_backend;
        include /etc/nginx/snippets/proxy-headers.conf;
    }

    location /static/ {
        proxy_pass http://app_backend/assets/;
        include /etc/nginx/snippets/proxy-headers.conf;
        proxy_hide_header X-Origin;
    }

    location = /healthz {
        access_log off;
        default_type text/plain;
        return 200 "ok\n";
    }

    location ~ \.php$ {
        deny all;
    }
}

server {
    if ($host = www.example.com) {
        return 301 https://$host$request_uri;
    } # managed by Certbot

    if ($host = app.example.com) {
        return 301 https://$host$request_uri;
    } # managed by Certbot

    listen 80;
    listen [::]:80;
    server_name app.example.com www.example.com;
    return 404; # managed by Certbot
}
